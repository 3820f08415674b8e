package broker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// BenchmarkLiteReceive: a lite consumer subscribed to n lite topics, of
// which every one or only one holds messages, receives one and
// acknowledges it: what a receive costs as n grows. listener=no receives
// with no client id, so with no listener: each receive is a pass over
// every lite topic, as all were before lite receives had listeners.
func BenchmarkLiteReceive(b *testing.B) {
	for _, c := range []struct {
		n        int
		one      bool
		listener bool
	}{{10, false, true}, {1000, false, true}, {10, true, true}, {1000, true, true}, {10000, true, true}, {10000, true, false}} {
		n := c.n
		name := fmt.Sprintf("subscribed=%d/holding=%s", n, map[bool]string{false: "all", true: "one"}[c.one])
		if !c.listener {
			name += "/listener=no"
		}
		b.Run(name, func(b *testing.B) {
			le := startLite(b, false)
			e, topic, group, f := le.Env, le.topic, le.group, le.filter
			lites := make([]string, n)
			per := b.N/n + 1
			if c.one {
				per = b.N
			}
			var batch []broker.LocalSend
			for i := range lites {
				lites[i] = "l" + strconv.Itoa(i)
				if c.one && i != n/2 {
					continue
				}
				for range per {
					batch = append(batch, broker.LocalSend{Topic: topic, LiteTopic: lites[i], BornTimestamp: 1, Body: []byte("x")})
				}
				if len(batch) >= 256 || i >= n/2 {
					for _, r := range e.Broker.SendLocalBatch(batch) {
						if r.Err != nil {
							b.Fatal(r.Err)
						}
					}
					batch = batch[:0]
				}
			}
			slices.Sort(lites)
			r := broker.POPReceive{Group: group, Topic: topic, Filter: f, Batch: 1, Invisible: time.Hour, Until: time.Now(),
				Client: "bench", LiteTopics: func() []string { return lites }}
			if !c.listener {
				r.Client = ""
			}
			b.ResetTimer()
			for range b.N {
				got, err := e.Broker.POP().Receive(context.Background(), r)
				if err != nil || len(got) != 1 {
					b.Fatalf("received %d: %v", len(got), err)
				}
				if err := e.Broker.POP().Ack(group, got[0].Topic, 1, got[0].Handle); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLiteWoken: a lite consumer subscribed to n lite topics waits;
// a message to one of them wakes it, and it looks at that one only. Each
// op is a send (with its fsync) and the woken receive: the cost should
// not grow with n.
func BenchmarkLiteWoken(b *testing.B) {
	for _, n := range []int{10, 10000} {
		b.Run(fmt.Sprintf("subscribed=%d", n), func(b *testing.B) {
			le := startLite(b, false)
			e, topic, group, f := le.Env, le.topic, le.group, le.filter
			lites := make([]string, n)
			for i := range lites {
				lites[i] = "l" + strconv.Itoa(i)
			}
			slices.Sort(lites)
			r := broker.POPReceive{Group: group, Topic: topic, Filter: f, Batch: 1, Invisible: time.Hour,
				Client: "bench", LiteTopics: func() []string { return lites }}
			got := make(chan broker.POPDelivery)
			go func() {
				defer close(got)
				for {
					r.Until = time.Now().Add(time.Minute)
					ds, err := e.Broker.POP().Receive(context.Background(), r)
					if err != nil || len(ds) != 1 {
						return
					}
					got <- ds[0]
				}
			}()
			for e.Broker.POP().Parked() == 0 {
				time.Sleep(time.Millisecond) // the receive's first full look: not measured
			}
			b.ResetTimer()
			for i := range b.N {
				l := lites[i%n]
				if r := e.Broker.SendLocalBatch([]broker.LocalSend{{Topic: topic, LiteTopic: l, BornTimestamp: 1, Body: []byte("x")}}); r[0].Err != nil {
					b.Fatal(r[0].Err)
				}
				d := <-got
				if err := e.Broker.POP().Ack(group, d.Topic, 1, d.Handle); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// liteEnv is a broker with a LITE topic and its POP engine open.
type liteEnv struct {
	*brokertest.Env
	topic, group string
	filter       broker.Filter
}

func startLite(t testing.TB, fifo bool, mutate ...func(*server.Config)) *liteEnv {
	t.Helper()
	e := &liteEnv{Env: brokertest.Start(t, mutate...), topic: brokertest.Name("Lite"), group: brokertest.Name("g")}
	if err := e.Broker.CreateTopic(broker.TopicConfig{TopicName: e.topic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6, MessageType: broker.MessageTypeLite}); err != nil {
		t.Fatal(err)
	}
	if err := e.Broker.PutGroupConfig(broker.SubscriptionGroupConfig{GroupName: e.group, ConsumeEnable: true, RetryQueueNums: 1, RetryMaxTimes: 16, ConsumeMessageOrderly: fifo}); err != nil {
		t.Fatal(err)
	}
	if err := e.Broker.POP().Open(broker.POPOptions{}); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.filter, err = e.Broker.CompileFilter(broker.ExpressionTag, "*"); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *liteEnv) send(t *testing.T, lite, body string) {
	t.Helper()
	if r := e.Broker.SendLocalBatch([]broker.LocalSend{{Topic: e.topic, LiteTopic: lite, BornTimestamp: 1, Body: []byte(body)}}); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
}

// receive receives as client, subscribed to lites, waiting up to wait.
func (e *liteEnv) receive(t *testing.T, client string, lites []string, batch int, wait time.Duration) []broker.POPDelivery {
	t.Helper()
	got, err := e.Broker.POP().Receive(context.Background(), broker.POPReceive{Group: e.group, Topic: e.topic, Filter: e.filter, Batch: batch,
		Invisible: time.Minute, Until: time.Now().Add(wait), Client: client, LiteTopics: func() []string { return lites }})
	if err != nil && !errors.Is(err, broker.ErrNoMessage) {
		t.Fatal(err)
	}
	return got
}

func liteBodies(ds []broker.POPDelivery) []string {
	var out []string
	for _, d := range ds {
		_, lite, _ := broker.SplitLiteQueue(d.Topic)
		out = append(out, lite+":"+string(d.Record.Body()))
	}
	return out
}

// TestLiteListenerMissesNothing: a lite consumer's receives, each taking
// less than what waits, get every message, taking turns among its lite
// topics, though no news comes between them; a quiet lite topic that gets
// a message between two receives is looked at by the next.
func TestLiteListenerMissesNothing(t *testing.T) {
	e := startLite(t, false)
	for i := range 5 {
		e.send(t, "a", fmt.Sprint("a", i))
		e.send(t, "b", fmt.Sprint("b", i))
	}
	lites := []string{"a", "b", "c", "d"}
	var got []string
	for range 10 {
		ds := e.receive(t, "c1", lites, 1, 0)
		if len(ds) != 1 {
			t.Fatalf("received %d after %v", len(ds), got)
		}
		got = append(got, liteBodies(ds)...)
	}
	for i := 0; i+1 < len(got); i += 2 {
		if got[i][0] == got[i+1][0] {
			t.Fatalf("the receives did not take turns: %v", got)
		}
	}
	if ds := e.receive(t, "c1", lites, 1, 0); len(ds) != 0 {
		t.Fatalf("an eleventh message: %v", liteBodies(ds))
	}
	e.send(t, "d", "d0")
	if got := liteBodies(e.receive(t, "c1", lites, 32, 0)); !slices.Equal(got, []string{"d:d0"}) {
		t.Fatalf("a message to a quiet lite topic between receives: %v", got)
	}
}

// TestLiteListenerWakes: a waiting lite receive is woken by a FIFO
// queue freed by an ack, by a message given up whose time comes, and by a
// lite topic subscribed while it waits, each without new messages.
func TestLiteListenerWakes(t *testing.T) {
	e := startLite(t, true)
	e.send(t, "f", "f0")
	e.send(t, "f", "f1")
	e.send(t, "g", "g0")
	var subs atomic.Pointer[[]string]
	subs.Store(&[]string{"f"})
	done := make(chan []broker.POPDelivery, 1)
	receive := func(wait time.Duration) []broker.POPDelivery {
		got, err := e.Broker.POP().Receive(context.Background(), broker.POPReceive{Group: e.group, Topic: e.topic, Filter: e.filter, Batch: 32,
			Invisible: time.Minute, Until: time.Now().Add(wait), Client: "c1", LiteTopics: func() []string { return *subs.Load() }})
		if err != nil && !errors.Is(err, broker.ErrNoMessage) {
			t.Error(err)
		}
		return got
	}
	waitOne := func() {
		go func() { done <- receive(20 * time.Second) }()
		for e.Broker.POP().Parked() == 0 {
			time.Sleep(time.Millisecond) // until it sleeps: then what wakes it is what the test does
		}
	}
	expect := func(what string, want ...string) []broker.POPDelivery {
		t.Helper()
		select {
		case ds := <-done:
			if got := liteBodies(ds); !slices.Equal(got, want) {
				t.Fatalf("%s: %v, want %v", what, got, want)
			}
			return ds
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the waiting receive was not woken", what)
		}
		return nil
	}
	first := receive(0) // FIFO: f0 and f1 together
	if got := liteBodies(first); !slices.Equal(got, []string{"f:f0", "f:f1"}) {
		t.Fatalf("first: %v", got)
	}
	e.send(t, "f", "f2") // held back while f0 and f1 are in flight
	waitOne()
	for _, d := range first {
		if err := e.Broker.POP().Ack(e.group, d.Topic, 1, d.Handle); err != nil {
			t.Fatal(err)
		}
	}
	f2 := expect("after the acks of f0 and f1", "f:f2")

	if _, err := e.Broker.POP().ChangeInvisible(e.group, f2[0].Topic, 1, f2[0].Handle, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitOne()
	if ds := expect("f2 given up for 300 ms", "f:f2"); ds[0].Attempt != 2 {
		t.Fatalf("f2 again at attempt %d", ds[0].Attempt)
	}

	waitOne()
	subs.Store(&[]string{"f", "g"})
	e.Broker.POP().LiteChanged(e.group, e.topic, "c1")
	expect("g subscribed while waiting", "g:g0")
}

// TestLiteExpiry: a LITE topic's lite topics nothing was written to for
// its expiration are deleted with their messages and their groups'
// state, and OnLiteExpired hears of them; one written to since is kept;
// one created again starts empty.
func TestLiteExpiry(t *testing.T) {
	var skew atomic.Int64
	e := startLite(t, false, func(c *server.Config) {
		c.Broker.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	})
	tc, _ := e.Broker.Topic(e.topic)
	tc.LiteExpiration = 30
	if err := e.Broker.CreateTopic(tc); err != nil {
		t.Fatal(err)
	}
	var expired []string
	e.Broker.Hooks().OnLiteExpired(func(parent, lite string) { expired = append(expired, parent+"/"+lite) })
	e.send(t, "old", "o0")
	e.send(t, "kept", "k0")
	first := e.receive(t, "c1", []string{"kept", "old"}, 32, 0)
	if len(first) != 2 {
		t.Fatalf("received %v", liteBodies(first))
	}
	for _, d := range first {
		if err := e.Broker.POP().Ack(e.group, d.Topic, 1, d.Handle); err != nil {
			t.Fatal(err)
		}
	}
	skew.Store(int64(20 * time.Minute))
	e.send(t, "kept", "k1")
	e.Broker.ExpireLiteTopics()
	if len(expired) != 0 {
		t.Fatalf("expired after 20 of 30 minutes: %v", expired)
	}
	skew.Store(int64(40 * time.Minute)) // old: 40 minutes; kept: 20
	e.Broker.ExpireLiteTopics()
	if !slices.Equal(expired, []string{e.topic + "/old"}) {
		t.Fatalf("expired %v, want old only", expired)
	}
	if got := e.Broker.View().LiteTopics(e.topic); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("lite topics %v", got)
	}
	if n := e.Store.MaxOffset(broker.LiteQueueTopic(e.topic, "old"), 0); n != 0 {
		t.Fatalf("an expired lite topic's queue holds %d", n)
	}
	e.send(t, "old", "o1")
	if got := liteBodies(e.receive(t, "c1", []string{"kept", "old"}, 32, 0)); !slices.Equal(got, []string{"kept:k1", "old:o1"}) && !slices.Equal(got, []string{"old:o1", "kept:k1"}) {
		t.Fatalf("after the expiry: %v", got)
	}
}

// FuzzReceiptHandle: reading a receipt handle, for its lite topic or to
// acknowledge a delivery, never fails but with an error, and only the
// handle the broker made acknowledges its delivery, under the lite
// topic's queue it was made for and no other topic.
func FuzzReceiptHandle(f *testing.F) {
	le := startLite(f, false)
	if r := le.Broker.SendLocalBatch([]broker.LocalSend{{Topic: le.topic, LiteTopic: "a", BornTimestamp: 1, Body: []byte("x")}}); r[0].Err != nil {
		f.Fatal(r[0].Err)
	}
	got, err := le.Broker.POP().Receive(context.Background(), broker.POPReceive{Group: le.group, Topic: le.topic, Filter: le.filter, Batch: 1,
		Invisible: time.Hour, Until: time.Now().Add(time.Second), Client: "fuzz", LiteTopics: func() []string { return []string{"a"} }})
	if err != nil || len(got) != 1 {
		f.Fatalf("receive: %v %v", got, err)
	}
	made, queue := got[0].Handle, got[0].Topic
	if lite := broker.HandleLiteTopic(made); lite != "a" {
		f.Fatalf("the handle of a message of lite topic a names %q", lite)
	}
	f.Add(made)
	f.Add(made[:len(made)-1])
	f.Add("AQAAAAAAAAAAAAAAACCqKO0o77vvAAABolM_TVM-hEFSqvs24uJnablIhc3R") // a plain queue's
	f.Add("")
	f.Fuzz(func(t *testing.T, h string) {
		if lite := broker.HandleLiteTopic(h); len(lite) > broker.MaxLiteTopicLen {
			t.Fatalf("lite topic of %d bytes read from %q", len(lite), h)
		}
		if err := le.Broker.POP().Ack(le.group, le.topic, 1, h); err == nil {
			t.Fatalf("handle %q acknowledged under the LITE topic itself", h)
		}
		if err := le.Broker.POP().Ack(le.group, queue, 1, h); err == nil && h != made {
			t.Fatalf("handle %q, not the one made (%q), acknowledged a delivery", h, made)
		}
	})
}
