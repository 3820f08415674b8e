package client

import (
	"testing"
	"time"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newFakeClock() *fakeClock           { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func TestFaultPauseTable(t *testing.T) {
	for _, tc := range []struct {
		latency, pause time.Duration
	}{
		{0, 0},
		{49 * time.Millisecond, 0},
		{100 * time.Millisecond, 0},
		{549 * time.Millisecond, 0},
		{550 * time.Millisecond, 30 * time.Second},
		{999 * time.Millisecond, 30 * time.Second},
		{time.Second, 60 * time.Second},
		{2 * time.Second, 120 * time.Second},
		{3 * time.Second, 180 * time.Second},
		{14 * time.Second, 180 * time.Second},
		{15 * time.Second, 600 * time.Second},
		{faultFailureLatency, 600 * time.Second},
	} {
		if got := faultPause(tc.latency); got != tc.pause {
			t.Errorf("faultPause(%v) = %v, want %v", tc.latency, got, tc.pause)
		}
	}
}

func TestFaultTrackerRules(t *testing.T) {
	clk := newFakeClock()
	f := newFaultTracker(clk.now)
	if !f.available("a") {
		t.Fatal("a broker never recorded is not available")
	}
	f.record(MessageQueue{BrokerName: "a"}, 10*time.Millisecond, false)
	if !f.available("a") {
		t.Fatal("a fast broker is held out")
	}
	f.record(MessageQueue{BrokerName: "slow"}, 600*time.Millisecond, false)
	if f.available("slow") {
		t.Fatal("a broker answering in 600ms is available at once")
	}
	clk.add(29 * time.Second)
	if f.available("slow") {
		t.Fatal("slow broker available after 29s, want 30s")
	}
	clk.add(time.Second)
	if !f.available("slow") {
		t.Fatal("slow broker still held out after 30s")
	}

	f.record(MessageQueue{BrokerName: "down"}, time.Millisecond, true)
	clk.add(599 * time.Second)
	if f.available("down") {
		t.Fatal("failed broker available before 600s")
	}
	clk.add(time.Second)
	if !f.available("down") {
		t.Fatal("failed broker held out after 600s")
	}

	// A later good record overrides a bad one.
	f.record(MessageQueue{BrokerName: "flappy"}, 0, true)
	f.record(MessageQueue{BrokerName: "flappy"}, time.Millisecond, false)
	if !f.available("flappy") {
		t.Fatal("a good send after a failure did not clear the broker")
	}
	if !f.available("a") {
		t.Fatal("recording other brokers changed a")
	}

	// A failed broker is probed until it answers, with the queue that
	// failed; a slow one is not. An answer to an older probe does not
	// clear a newer failure.
	q := MessageQueue{Topic: "T", BrokerName: "gone", QueueID: 2}
	f.record(q, 0, true)
	f.record(MessageQueue{BrokerName: "slow2"}, 600*time.Millisecond, false)
	if got := f.toProbe(); len(got) != 1 || got[0] != q {
		t.Fatalf("toProbe = %v, want only %v", got, q)
	}
	f.answered("gone", MessageQueue{Topic: "T", BrokerName: "gone", QueueID: 1})
	if f.available("gone") {
		t.Fatal("an answer to another queue's probe cleared the failure")
	}
	f.answered("gone", q)
	if !f.available("gone") || len(f.toProbe()) != 0 {
		t.Fatal("a broker that answered its probe is still held out")
	}

	var none *faultTracker
	none.record(MessageQueue{BrokerName: "x"}, 0, true)
	if !none.available("x") {
		t.Fatal("a nil tracker holds a broker out")
	}
}
