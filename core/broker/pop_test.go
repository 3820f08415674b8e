package broker_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// popEnv is a broker with its POP engine open and one topic.
type popEnv struct {
	*brokertest.Env
	topic, group string
	queues       int
}

func startPOP(t *testing.T, queues int) *popEnv {
	t.Helper()
	e := &popEnv{Env: brokertest.Start(t), topic: brokertest.Name("Pop"), group: brokertest.Name("g"), queues: queues}
	if err := e.Broker.CreateTopic(broker.TopicConfig{TopicName: e.topic, ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	if err := e.Broker.POP().Open(broker.POPOptions{}); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *popEnv) send(t *testing.T, body string) {
	t.Helper()
	r := e.Broker.SendLocalBatch([]broker.LocalSend{{Topic: e.topic, QueueID: -1, BornTimestamp: time.Now().UnixMilli(), Body: []byte(body)}})
	if r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
}

// receive returns what one receive hands out without waiting.
func (e *popEnv) receive(t *testing.T, invisible time.Duration) []broker.POPDelivery {
	t.Helper()
	f, err := e.Broker.CompileFilter(broker.ExpressionTag, "*")
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Broker.POP().Receive(context.Background(), broker.POPReceive{Group: e.group, Topic: e.topic, ReadQueues: e.queues,
		Filter: f, Batch: 32, Invisible: invisible, Until: time.Now()})
	if err != nil && !errors.Is(err, broker.ErrNoMessage) {
		t.Fatal(err)
	}
	return got
}

// TestPOPNotOpen: a broker whose engine no front end opened serves no
// POP call.
func TestPOPNotOpen(t *testing.T) {
	env := brokertest.Start(t)
	if err := env.Broker.POP().Ack("g", "T", 1, "x"); !errors.Is(err, broker.ErrUnavailable) {
		t.Fatalf("ack on an engine never opened: %v, want ErrUnavailable", err)
	}
}

// TestPOPHandleSurvivesRestart: a receipt handle given by one engine is
// acknowledged by the next on the same store (the secret and the flight
// are stored), once only.
func TestPOPHandleSurvivesRestart(t *testing.T) {
	e := startPOP(t, 2)
	e.send(t, "a")
	got := e.receive(t, time.Minute)
	if len(got) != 1 || string(got[0].Record.Body()) != "a" || got[0].Attempt != 1 {
		t.Fatalf("received %+v", got)
	}
	e.Env = e.Restart(t)
	if err := e.Broker.POP().Open(broker.POPOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Broker.POP().Ack(e.group, e.topic, e.queues, got[0].Handle); err != nil {
		t.Fatalf("ack after restart: %v", err)
	}
	if err := e.Broker.POP().Ack(e.group, e.topic, e.queues, got[0].Handle); !errors.Is(err, broker.ErrBadReceiptHandle) {
		t.Fatalf("second ack: %v, want ErrBadReceiptHandle", err)
	}
	if again := e.receive(t, time.Minute); len(again) != 0 {
		t.Fatalf("an acknowledged message came back: %+v", again)
	}
}

// TestPOPAckAll: one AckAll acknowledges a received batch, each handle
// with its own result: a handle named twice is acknowledged once, a
// malformed one refused, and the others are unaffected. The flights it
// ended stay ended after a restart; the one it was not given survives.
func TestPOPAckAll(t *testing.T) {
	e := startPOP(t, 2)
	for _, b := range []string{"a", "b", "c", "d"} {
		e.send(t, b)
	}
	got := e.receive(t, time.Minute)
	if len(got) != 4 {
		t.Fatalf("received %d of 4", len(got))
	}
	h := func(i int) string { return got[i].Handle }
	errs := e.Broker.POP().AckAll(e.group, e.topic, e.queues, []string{h(0), h(1), h(0), "not-a-handle", h(2)})
	for i, want := range []error{nil, nil, broker.ErrBadReceiptHandle, broker.ErrBadReceiptHandle, nil} {
		if (want == nil) != (errs[i] == nil) || (want != nil && !errors.Is(errs[i], want)) {
			t.Fatalf("entry %d: %v, want %v (all: %v)", i, errs[i], want, errs)
		}
	}
	e.Env = e.Restart(t)
	if err := e.Broker.POP().Open(broker.POPOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := e.Broker.POP().Ack(e.group, e.topic, e.queues, h(i)); !errors.Is(err, broker.ErrBadReceiptHandle) {
			t.Fatalf("handle %d, acknowledged before the restart: %v, want ErrBadReceiptHandle", i, err)
		}
	}
	if err := e.Broker.POP().Ack(e.group, e.topic, e.queues, h(3)); err != nil {
		t.Fatalf("the handle AckAll was not given, after the restart: %v", err)
	}
}

// TestPOPAckAllPastOneWrite: an AckAll of more handles than one write
// takes ends every flight, across the writes.
func TestPOPAckAllPastOneWrite(t *testing.T) {
	e := startPOP(t, 1)
	const n = 1100 // more than popAckBatch
	sends := make([]broker.LocalSend, n)
	for i := range sends {
		sends[i] = broker.LocalSend{Topic: e.topic, QueueID: -1, BornTimestamp: time.Now().UnixMilli(), Body: []byte(strconv.Itoa(i))}
	}
	for _, r := range e.Broker.SendLocalBatch(sends) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	var handles []string
	for len(handles) < n {
		got := e.receive(t, time.Minute)
		if len(got) == 0 {
			t.Fatalf("received %d of %d", len(handles), n)
		}
		for _, d := range got {
			handles = append(handles, d.Handle)
		}
	}
	for i, err := range e.Broker.POP().AckAll(e.group, e.topic, e.queues, handles) {
		if err != nil {
			t.Fatalf("handle %d: %v", i, err)
		}
	}
	for _, i := range []int{0, 1023, 1024, n - 1} {
		if err := e.Broker.POP().Ack(e.group, e.topic, e.queues, handles[i]); !errors.Is(err, broker.ErrBadReceiptHandle) {
			t.Fatalf("handle %d after AckAll: %v, want ErrBadReceiptHandle", i, err)
		}
	}
}

// TestPOPSupersededHandle: a change of invisible time replaces the
// handle; the old one is refused with the sentinel, so is one of another
// group, and the new one acknowledges.
func TestPOPSupersededHandle(t *testing.T) {
	e := startPOP(t, 1)
	e.send(t, "a")
	got := e.receive(t, time.Minute)
	if len(got) != 1 {
		t.Fatalf("received %d", len(got))
	}
	old := got[0].Handle
	h, err := e.Broker.POP().ChangeInvisible(e.group, e.topic, e.queues, old, time.Minute)
	if err != nil || h == "" || h == old {
		t.Fatalf("change: %q %v", h, err)
	}
	if err := e.Broker.POP().Ack(e.group, e.topic, e.queues, old); !errors.Is(err, broker.ErrBadReceiptHandle) {
		t.Fatalf("ack of the superseded handle: %v, want ErrBadReceiptHandle", err)
	}
	if err := e.Broker.POP().Ack("other", e.topic, e.queues, h); !errors.Is(err, broker.ErrBadReceiptHandle) {
		t.Fatalf("ack by another group: %v, want ErrBadReceiptHandle", err)
	}
	if err := e.Broker.POP().Ack(e.group, e.topic, e.queues, h); err != nil {
		t.Fatalf("ack of the new handle: %v", err)
	}
}

// TestPOPStoredLayout: the engine keeps the layout the front end's
// engine wrote (doc.go): the cursor's key and value, the flight's key,
// the secret's meta key, and handles MAC'd under that secret. A handle
// built by hand from the stored secret is accepted.
func TestPOPStoredLayout(t *testing.T) {
	e := startPOP(t, 1)
	e.send(t, "a")
	e.send(t, "b")
	got := e.receive(t, time.Minute)
	if len(got) != 2 {
		t.Fatalf("received %d", len(got))
	}
	base := "\x00" + e.topic + "\x00\x00\x00\x00\x00" // queue 0
	v, ok, err := e.Store.Value([]byte("grpc/pop/c/"+e.group+base), nil)
	if err != nil || !ok || !bytes.Equal(v, binary.BigEndian.AppendUint64(nil, 2)) {
		t.Fatalf("cursor: %x %v %v", v, ok, err)
	}
	fk := binary.BigEndian.AppendUint64([]byte("grpc/pop/f/"+e.group+base), 1)
	v, ok, err = e.Store.Value(fk, nil)
	if err != nil || !ok || len(v) != 20 || binary.BigEndian.Uint32(v) != 1 {
		t.Fatalf("flight of offset 1: %x %v %v", v, ok, err)
	}
	secret, err := e.Store.Meta("grpc/pop/secret")
	if err != nil || len(secret) != 32 {
		t.Fatalf("secret: %d bytes, %v", len(secret), err)
	}
	// The handle of offset 1, as an engine of the earlier layout built it.
	body := []byte{1}
	body = binary.BigEndian.AppendUint32(body, 0)
	body = binary.BigEndian.AppendUint64(body, 1)
	body = binary.BigEndian.AppendUint64(body, binary.BigEndian.Uint64(v[4:]))
	body = binary.BigEndian.AppendUint64(body, binary.BigEndian.Uint64(v[12:]))
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("rh/" + e.group + "\x00" + e.topic + "\x00"))
	m.Write(body)
	h := base64.RawURLEncoding.EncodeToString(append(body, m.Sum(nil)[:16]...))
	if h != got[1].Handle {
		t.Fatalf("handle %s, built by hand %s", got[1].Handle, h)
	}
	if err := e.Broker.POP().Ack(e.group, e.topic, e.queues, h); err != nil {
		t.Fatalf("ack of the hand-built handle: %v", err)
	}
	if _, ok, _ := e.Store.Value(fk, nil); ok {
		t.Fatal("the acknowledged flight is still stored")
	}
}

// TestPOPTransactionID: a transaction id names its offset for its topic
// only.
func TestPOPTransactionID(t *testing.T) {
	e := startPOP(t, 1)
	id := e.Broker.POP().TransactionID(e.topic, 12345)
	if off, err := e.Broker.POP().ParseTransactionID(e.topic, id); err != nil || off != 12345 {
		t.Fatalf("parse: %d %v", off, err)
	}
	if _, err := e.Broker.POP().ParseTransactionID("Other", id); !errors.Is(err, broker.ErrBadTransactionID) {
		t.Fatalf("another topic's: %v, want ErrBadTransactionID", err)
	}
}

// TestPOPArrivalWakesReceive: the broker wakes a waiting receive when a
// message arrives on its topic, long before its long polling ends; a
// receive whose Stop closes ends with ErrNoMessage.
func TestPOPArrivalWakesReceive(t *testing.T) {
	e := startPOP(t, 1)
	f, _ := e.Broker.CompileFilter(broker.ExpressionTag, "*")
	type result struct {
		ds  []broker.POPDelivery
		err error
	}
	done := make(chan result, 1)
	go func() {
		ds, err := e.Broker.POP().Receive(context.Background(), broker.POPReceive{Group: e.group, Topic: e.topic, ReadQueues: e.queues,
			Filter: f, Batch: 1, Invisible: time.Minute, Until: time.Now().Add(time.Hour)})
		done <- result{ds, err}
	}()
	brokertest.Eventually(t, 10*time.Second, "a parked receive", func() bool { return e.Broker.POP().Parked() == 1 })
	e.send(t, "woken")
	r := brokertest.Wait(t, done, 10*time.Second, "the woken receive")
	if r.err != nil || len(r.ds) != 1 || string(r.ds[0].Record.Body()) != "woken" {
		t.Fatalf("receive: %+v %v", r.ds, r.err)
	}

	stop := make(chan struct{})
	go func() {
		ds, err := e.Broker.POP().Receive(context.Background(), broker.POPReceive{Group: e.group, Topic: e.topic, ReadQueues: e.queues,
			Filter: f, Batch: 1, Invisible: time.Minute, Until: time.Now().Add(time.Hour), Stop: stop})
		done <- result{ds, err}
	}()
	brokertest.Eventually(t, 10*time.Second, "a parked receive", func() bool { return e.Broker.POP().Parked() == 1 })
	close(stop)
	if r := brokertest.Wait(t, done, 10*time.Second, "the stopped receive"); !errors.Is(r.err, broker.ErrNoMessage) {
		t.Fatalf("stopped receive: %+v %v, want ErrNoMessage", r.ds, r.err)
	}
}

// TestPOPTopicDeletionDropsState: deleting a topic drops every group's
// POP state of it, so the topic created again starts over.
func TestPOPTopicDeletionDropsState(t *testing.T) {
	e := startPOP(t, 1)
	e.send(t, "a")
	if got := e.receive(t, time.Minute); len(got) != 1 {
		t.Fatalf("received %d", len(got))
	}
	keys := func() (ks [][]byte) {
		for _, prefix := range []string{"grpc/pop/c/", "grpc/pop/f/"} {
			if err := e.Store.ScanKeys([]byte(prefix+e.group+"\x00"), nil, func(k []byte) bool {
				ks = append(ks, bytes.Clone(k))
				return true
			}); err != nil {
				t.Fatal(err)
			}
		}
		return ks
	}
	if n := len(keys()); n != 2 {
		t.Fatalf("%d POP keys before the deletion, want a cursor and a flight", n)
	}
	if err := e.Broker.DeleteTopic(e.topic); err != nil {
		t.Fatal(err)
	}
	if left := keys(); len(left) > 0 {
		t.Fatalf("POP keys left after the topic's deletion: %q", left)
	}
}

// TestPOPMaxWaiting: past POPOptions.MaxWaiting waiting receives, a
// receive is refused with ErrTooManyWaiting at once.
func TestPOPMaxWaiting(t *testing.T) {
	e := startPOP(t, 1)
	if err := e.Broker.POP().Open(broker.POPOptions{MaxWaiting: 1}); err != nil {
		t.Fatal(err)
	}
	f, _ := e.Broker.CompileFilter(broker.ExpressionTag, "*")
	r := broker.POPReceive{Group: e.group, Topic: e.topic, ReadQueues: e.queues, Filter: f, Batch: 1, Invisible: time.Minute, Until: time.Now().Add(time.Hour)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := e.Broker.POP().Receive(ctx, r)
		done <- err
	}()
	brokertest.Eventually(t, 10*time.Second, "a parked receive", func() bool { return e.Broker.POP().Parked() == 1 })
	if _, err := e.Broker.POP().Receive(context.Background(), r); !errors.Is(err, broker.ErrTooManyWaiting) {
		t.Fatalf("second receive: %v, want ErrTooManyWaiting", err)
	}
	cancel()
	if err := brokertest.Wait(t, done, 10*time.Second, "the cancelled receive"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled receive: %v", err)
	}
	if n := e.Broker.POP().Waiting(); n != 0 {
		t.Fatalf("%d receives still counted as waiting", n)
	}
}

// BenchmarkPOPAckInFlight: acknowledging one message and receiving the
// next while n others of the queue stay in flight, as a push consumer with
// a deep local cache does. What one ack and one receive cost should not
// grow with n.
func BenchmarkPOPAckInFlight(b *testing.B) {
	for _, n := range []int{32, 1024, 8192} {
		b.Run(fmt.Sprintf("inflight=%d", n), func(b *testing.B) {
			e := &popEnv{Env: brokertest.Start(b), topic: brokertest.Name("Pop"), group: brokertest.Name("g"), queues: 1}
			if err := e.Broker.CreateTopic(broker.TopicConfig{TopicName: e.topic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
				b.Fatal(err)
			}
			if err := e.Broker.POP().Open(broker.POPOptions{}); err != nil {
				b.Fatal(err)
			}
			f, err := e.Broker.CompileFilter(broker.ExpressionTag, "*")
			if err != nil {
				b.Fatal(err)
			}
			batch := make([]broker.LocalSend, 0, 256)
			for sent := 0; sent < n+b.N; {
				batch = batch[:0]
				for ; len(batch) < cap(batch) && sent < n+b.N; sent++ {
					batch = append(batch, broker.LocalSend{Topic: e.topic, QueueID: 0, BornTimestamp: 1, Body: []byte("x")})
				}
				for _, r := range e.Broker.SendLocalBatch(batch) {
					if r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			receive := func(k int) []broker.POPDelivery {
				got, err := e.Broker.POP().Receive(context.Background(), broker.POPReceive{Group: e.group, Topic: e.topic, ReadQueues: 1,
					Filter: f, Batch: k, Invisible: time.Hour, Until: time.Now()})
				if err != nil {
					b.Fatal(err)
				}
				return got
			}
			var held []string
			for len(held) < n {
				for _, d := range receive(min(32, n-len(held))) {
					held = append(held, d.Handle)
				}
			}
			b.ResetTimer()
			for i := range b.N {
				if err := e.Broker.POP().Ack(e.group, e.topic, 1, held[i]); err != nil {
					b.Fatal(err)
				}
				got := receive(1)
				if len(got) != 1 {
					b.Fatalf("received %d, want 1", len(got))
				}
				held = append(held, got[0].Handle)
			}
		})
	}
}

// TestPOPManyInFlight: with far more acknowledged than in flight (the due
// heap compacts), acknowledgements out of order commit the lowest offset
// still in flight, and messages whose invisible time is cut to zero come
// back oldest first, each once, while the others stay invisible.
func TestPOPManyInFlight(t *testing.T) {
	e := startPOP(t, 1)
	const n = 200
	for i := range n {
		e.send(t, fmt.Sprint(i))
	}
	handles := make([]string, n)
	for got := 0; got < n; {
		ds := e.receive(t, time.Hour)
		if len(ds) == 0 {
			t.Fatalf("received %d of %d", got, n)
		}
		for _, d := range ds {
			if handles[d.Offset] != "" {
				t.Fatalf("offset %d received twice", d.Offset)
			}
			handles[d.Offset] = d.Handle
			got++
		}
	}
	committed := func() int64 {
		t.Helper()
		off, _ := e.Store.ConsumerOffset(e.group, e.topic, 0)
		return off
	}
	ack := func(off int) {
		t.Helper()
		if err := e.Broker.POP().Ack(e.group, e.topic, 1, handles[off]); err != nil {
			t.Fatalf("ack %d: %v", off, err)
		}
	}
	// Acknowledge every offset but multiples of 4, newest first.
	for off := n - 1; off >= 0; off-- {
		if off%4 != 0 {
			ack(off)
		}
	}
	if got := committed(); got != 0 {
		t.Fatalf("committed %d with offset 0 in flight, want 0", got)
	}
	ack(0)
	if got := committed(); got != 4 {
		t.Fatalf("committed %d after acknowledging 0, want 4 (the lowest in flight)", got)
	}
	// Cut the invisible time of every other remaining one to zero.
	var want []int64
	for off := 8; off < n; off += 8 {
		h, err := e.Broker.POP().ChangeInvisible(e.group, e.topic, 1, handles[off], 0)
		if err != nil {
			t.Fatalf("change invisible of %d: %v", off, err)
		}
		handles[off] = h
		want = append(want, int64(off))
	}
	var again []int64
	for {
		ds := e.receive(t, time.Hour)
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			if d.Attempt != 2 {
				t.Fatalf("offset %d came back at attempt %d, want 2", d.Offset, d.Attempt)
			}
			again = append(again, d.Offset)
			handles[d.Offset] = d.Handle
		}
	}
	if !slices.Equal(again, want) {
		t.Fatalf("came back %v, want %v", again, want)
	}
	for off := 4; off < n; off += 4 {
		ack(off)
	}
	if got := committed(); got != n {
		t.Fatalf("committed %d with nothing in flight, want %d", got, n)
	}
}
