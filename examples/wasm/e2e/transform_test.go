package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
	"github.com/rmq-go/rmq/plugins/wasm"
)

func transformPlugin(name string, module []byte, config string, topics ...string) server.Plugin {
	return server.Plugin{Options: wasm.Options{Name: name, Kind: wasm.KindTransform, Module: module, Config: []byte(config)}, Topics: topics}
}

// consume starts a push consumer of topic that collects bodies.
func consume(t *testing.T, env *brokertest.Env, topic string) *received {
	t.Helper()
	got := newReceived()
	group := brokertest.Name("cg")
	c := env.PushConsumer(t, group)
	if err := c.Subscribe(topic, consumer.MessageSelector{}, got.listener); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, group, true, topic)
	return got
}

// TestTransformValidateAndMask has a broker validate sends to one topic
// with the jsonschema example and mask a field of sends to others with
// jsonmask, through the official client: a bad message's send fails with
// the plugin's reason, a batch with one bad message is refused whole, and
// the consumers read back exactly the good messages, masked where asked.
func TestTransformValidateAndMask(t *testing.T) {
	schema := guestbuild.Module(t, "../jsonschema")
	mask := guestbuild.Module(t, "../jsonmask")
	orders, payments := brokertest.Name("Orders"), brokertest.Name("Pay")
	list := &pluginList{}
	list.set(
		transformPlugin("schema", schema, `{"required":{"id":"string","amount":"number"}}`, orders),
		transformPlugin("mask", mask, `{"fields":["card"],"keep":4}`, payments[:len(payments)-2]+"*"),
	)
	env := start(t, list)
	createTopic(t, env, orders, 1)
	createTopic(t, env, payments, 1)
	p := env.Producer(t, producer.WithRetry(0))
	ctx := context.Background()

	_, err := p.SendSync(ctx, primitive.NewMessage(orders, []byte(`{"id":"o1","amount":"ten"}`)))
	if err == nil || !strings.Contains(err.Error(), "field amount is string, want number") || !strings.Contains(err.Error(), "schema") {
		t.Fatalf("bad message: err %v, want the plugin's reason", err)
	}
	send(t, env, p, orders, `{"id":"o2","amount":10}`)
	batch := []*primitive.Message{
		primitive.NewMessage(orders, []byte(`{"id":"b1","amount":1}`)),
		primitive.NewMessage(orders, []byte(`{"id":"b2"}`)),
		primitive.NewMessage(orders, []byte(`{"id":"b3","amount":3}`)),
	}
	if _, err := p.SendSync(ctx, batch...); err == nil || !strings.Contains(err.Error(), "field amount is required") {
		t.Fatalf("batch with a bad message: err %v, want it refused with the reason", err)
	}
	if _, err := p.SendSync(ctx, batch[0], batch[2]); err != nil {
		t.Fatalf("good batch: %v", err)
	}
	send(t, env, p, orders, `{"id":"o3","amount":3}`)

	got := consume(t, env, orders)
	got.waitFor(t, "o2", "b1", "b3", "o3")
	got.exactly(t, "o2", "b1", "b3", "o3")

	send(t, env, p, payments, `{"id":"p1","card":"4111111111111111"}`, `{"id":"p2"}`)
	var mu sync.Mutex
	bodies := map[string]string{}
	done := make(chan struct{})
	payGroup := brokertest.Name("cg_pay")
	c := env.PushConsumer(t, payGroup)
	if err := c.Subscribe(payments, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			var doc struct{ ID string }
			_ = json.Unmarshal(m.Body, &doc)
			bodies[doc.ID] = string(m.Body) + " MASKED=" + m.GetProperty("MASKED")
		}
		if len(bodies) == 2 {
			close(done)
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, payGroup, true, payments)
	brokertest.Wait(t, done, 30*time.Second, "the payments")
	mu.Lock()
	if bodies["p1"] != `{"card":"************1111","id":"p1"} MASKED=true` || bodies["p2"] != `{"id":"p2"} MASKED=` {
		t.Fatalf("stored bodies %q: want p1 masked, p2 as sent", bodies)
	}
	mu.Unlock()

	ps := pluginStatus(t, env, "schema")
	if ps.Kind != "transform" || ps.Rejected != 2 || ps.Calls == 0 || !slices.Equal(ps.Topics, []string{orders}) || ps.FailurePolicy != "reject" {
		t.Fatalf("schema status: %+v", ps)
	}
	t.Logf("schema: %d calls, %d messages, p99 of one send's transform %v", ps.Calls, ps.Records, time.Duration(ps.P99Nanos))
	ms := pluginStatus(t, env, "mask")
	t.Logf("mask: %d calls, p99 of one send's transform %v", ms.Calls, time.Duration(ms.P99Nanos))
}

// TestTransformFailurePolicy runs a transform that traps on one message
// and spins past its deadline on another, under each failure policy: with
// reject those sends fail and nothing of them is stored, with pass they
// are stored as sent; the broker keeps serving both topics throughout.
func TestTransformFailurePolicy(t *testing.T) {
	chaos := guestbuild.Module(t, "testdata/chaostransform")
	strict, lenient := brokertest.Name("Strict"), brokertest.Name("Lenient")
	untrusted := func(sp server.Plugin, policy wasm.Policy) server.Plugin {
		sp.Untrusted, sp.Deadline, sp.FailurePolicy = true, 200*time.Millisecond, policy
		return sp
	}
	list := &pluginList{}
	list.set(
		untrusted(transformPlugin("strict", chaos, "", strict), wasm.PolicyReject),
		untrusted(transformPlugin("lenient", chaos, "", lenient), wasm.PolicyPass),
	)
	env := start(t, list)
	createTopic(t, env, strict, 1)
	createTopic(t, env, lenient, 1)
	p := env.Producer(t, producer.WithRetry(0))
	ctx := context.Background()

	for _, body := range []string{"trap", "spin"} {
		if _, err := p.SendSync(ctx, primitive.NewMessage(strict, []byte(body))); err == nil {
			t.Fatalf("%s under reject: the send succeeded", body)
		}
	}
	if _, err := p.SendSync(ctx, primitive.NewMessage(strict, []byte("reject:not today"))); err == nil || !strings.Contains(err.Error(), "not today") {
		t.Fatalf("reject: %v", err)
	}
	send(t, env, p, strict, "fine")
	send(t, env, p, lenient, "trap", "spin", "fine")

	got := consume(t, env, strict)
	got.waitFor(t, "body:fine")
	gotL := consume(t, env, lenient)
	gotL.waitFor(t, "body:trap", "body:spin", "body:fine")
	got.exactly(t, "body:fine")
	gotL.exactly(t, "body:trap", "body:spin", "body:fine")

	for _, name := range []string{"strict", "lenient"} {
		ps := pluginStatus(t, env, name)
		if ps.Traps != 1 || ps.Timeouts != 1 || ps.Disabled {
			t.Fatalf("%s status: %+v, want one trap and one timeout", name, ps)
		}
	}
}

// TestTransformReloadUnderLoad reroutes every send to topic A while
// producers keep sending; a reload switches the route to topic B. Every
// acknowledged message is stored exactly once, in A or B, none in the
// topic it was sent to, and those sent after the reload returned in B.
func TestTransformReloadUnderLoad(t *testing.T) {
	chaos := guestbuild.Module(t, "testdata/chaostransform")
	src, a, b := brokertest.Name("Src"), brokertest.Name("RouteA"), brokertest.Name("RouteB")
	route := func(to string) server.Plugin {
		return transformPlugin("router", chaos, fmt.Sprintf(`{"route":%q}`, to), src)
	}
	list := &pluginList{}
	list.set(route(a))
	env := start(t, list)
	for _, topic := range []string{src, a, b} {
		createTopic(t, env, topic, 2)
	}
	p := env.Producer(t, producer.WithRetry(0))

	var (
		sent     atomic.Int64
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		errs     = make(chan error, 1)
		reloaded atomic.Bool
		after    sync.Map // ids sent after the reload returned
	)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				wasAfter := reloaded.Load()
				if _, err := p.SendSync(context.Background(), primitive.NewMessage(src, []byte(`{"id":"`+id+`"}`))); err != nil {
					select {
					case errs <- fmt.Errorf("send %s: %w", id, err):
					default:
					}
					return
				}
				if wasAfter {
					after.Store(id, true)
				}
				sent.Add(1)
			}
		}()
	}
	brokertest.Eventually(t, 30*time.Second, "sends before the reload", func() bool { return sent.Load() >= 50 })
	list.set(route(b))
	if r := reload(t, env); !slices.Equal(r.Reloaded, []string{"router"}) {
		t.Fatalf("reload: %+v", r)
	}
	reloaded.Store(true)
	brokertest.Eventually(t, 30*time.Second, "sends after the reload", func() bool {
		n := 0
		after.Range(func(any, any) bool { n++; return n < 50 })
		return n >= 50
	})
	close(stop)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}

	gotA, gotB, gotSrc := consume(t, env, a), consume(t, env, b), consume(t, env, src)
	brokertest.Eventually(t, 60*time.Second, "every message in A or B", func() bool {
		return len(gotA.snapshot())+len(gotB.snapshot()) >= int(sent.Load())
	})
	inA := map[string]bool{}
	for _, id := range gotA.snapshot() {
		inA[id] = true
	}
	gotB.mu.Lock()
	for id, n := range gotB.ids {
		if inA[id] || n != 1 {
			t.Errorf("message %s stored in both topics, or twice", id)
		}
	}
	gotB.mu.Unlock()
	after.Range(func(k, _ any) bool {
		if inA[k.(string)] {
			t.Errorf("message %s, sent after the reload, went to the old route", k)
		}
		return true
	})
	if n := len(gotA.snapshot()) + len(gotB.snapshot()); n != int(sent.Load()) {
		t.Errorf("%d messages stored in A and B, %d acknowledged", n, sent.Load())
	}
	if ids := gotSrc.snapshot(); len(ids) != 0 {
		t.Errorf("%d messages stored in the topic they were sent to", len(ids))
	}
}
