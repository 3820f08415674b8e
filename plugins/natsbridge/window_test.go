package natsbridge

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// TestWindowScript drives the window through acknowledgements out of
// order, duplicates, failures, stale outcomes and rewinds.
func TestWindowScript(t *testing.T) {
	w := newWindow(4, 10)
	msgs := map[int64]*nats.Msg{}
	send := func(n int) {
		for range n {
			m := &nats.Msg{}
			msgs[w.next] = m
			w.push(slotSent, m, 1)
		}
	}
	expect := func(step string, cursor, next int64, sent int) {
		t.Helper()
		if w.cursor != cursor || w.next != next || w.sent != sent {
			t.Fatalf("%s: cursor %d next %d sent %d, want %d %d %d", step, w.cursor, w.next, w.sent, cursor, next, sent)
		}
	}

	send(4)
	expect("filled", 10, 14, 4)
	if w.room() != 0 {
		t.Fatal("room in a full window")
	}
	w.ack(12)
	w.ack(13)
	w.advance()
	expect("acks past a gap do not move the cursor", 10, 14, 2)
	if w.ack(12) {
		t.Fatal("a second ack of 12 changed something")
	}
	w.ack(10)
	w.advance()
	expect("the cursor moves over the contiguous run", 11, 14, 1)

	// 11 fails; a stale error for an older message of 11 is ignored.
	if w.fail(11, &nats.Msg{}) {
		t.Fatal("an error for another message of 11 counted")
	}
	if !w.fail(11, msgs[11]) {
		t.Fatal("the error for 11 did not count")
	}
	w.advance()
	expect("a failure holds the cursor", 11, 14, 0)
	w.rewind()
	expect("rewind", 11, 11, 0)

	send(4)
	expect("republished", 11, 15, 4)
	// An ack from before the rewind still proves the event is stored.
	if !w.ack(11) {
		t.Fatal("a late ack of 11 did not count")
	}
	if w.fail(11, msgs[11]) {
		t.Fatal("an error after the ack counted")
	}
	w.advance()
	expect("late ack", 12, 15, 3)
	if w.ack(20) || w.ack(5) {
		t.Fatal("an ack outside the window counted")
	}
	if n := w.ackSent(); n != 3 {
		t.Fatalf("ackSent %d", n)
	}
	w.advance()
	expect("flush", 15, 15, 0)
	w.reset(40)
	expect("reset", 40, 40, 0)
	w.push(slotDone, nil, 0)
	w.advance()
	expect("left-out events pass", 41, 41, 0)
}

func TestWindowOverflowPanics(t *testing.T) {
	w := newWindow(1, 0)
	w.push(slotSent, &nats.Msg{}, 0)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	w.push(slotSent, &nats.Msg{}, 0)
}
