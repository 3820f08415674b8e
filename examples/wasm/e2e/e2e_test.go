package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	qa "github.com/rmq-go/rmq/core/allocate"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// cacheDir is the compilation cache every broker of the test process
// shares, so each module is compiled once.
var cacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "e2e-wasm-cache-")
	if err != nil {
		panic(err)
	}
	cacheDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// pluginList is a broker's plugin list that a test changes before asking
// for a reload, as an operator edits the config file.
type pluginList struct {
	mu    sync.Mutex
	specs []server.Plugin
}

func (l *pluginList) get() ([]server.Plugin, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.specs), nil
}

func (l *pluginList) set(specs ...server.Plugin) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.specs = specs
}

// start runs a broker with the list's plugins.
func start(t *testing.T, list *pluginList) *brokertest.Env {
	t.Helper()
	return brokertest.Start(t, func(c *server.Config) {
		c.Plugins, _ = list.get()
		c.PluginSource = list.get
		c.PluginCacheDir = cacheDir
	})
}

func classPlugin(module []byte, config string) server.Plugin {
	return server.Plugin{Options: wasm.Options{Name: "class", Kind: wasm.KindFilter, ExpressionType: "CLASS", Module: module, Config: []byte(config)}}
}

func createTopic(t *testing.T, env *brokertest.Env, topic string, queues int) {
	t.Helper()
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6}); err != nil {
		t.Fatal(err)
	}
}

// send sends JSON bodies in order.
func send(t *testing.T, env *brokertest.Env, p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, topic string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		if res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(b))); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %s: %v %v", b, res, err)
		}
	}
}

// received collects the ids of the JSON bodies a consumer receives.
type received struct {
	mu      sync.Mutex
	ids     map[string]int // id → deliveries
	changed chan struct{}  // closed and replaced on every delivery
}

func newReceived() *received {
	return &received{ids: map[string]int{}, changed: make(chan struct{})}
}

func (r *received) listener(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range msgs {
		var doc struct{ ID string }
		if err := json.Unmarshal(m.Body, &doc); err != nil || doc.ID == "" {
			doc.ID = "body:" + string(m.Body)
		}
		r.ids[doc.ID]++
	}
	close(r.changed)
	r.changed = make(chan struct{})
	return consumer.ConsumeSuccess, nil
}

// snapshot returns the ids received so far, sorted.
func (r *received) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id := range r.ids {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// waitFor waits until every id in want has been received.
func (r *received) waitFor(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		missing := 0
		for _, id := range want {
			if r.ids[id] == 0 {
				missing++
			}
		}
		ch := r.changed
		r.mu.Unlock()
		if missing == 0 {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %v; received %v", want, r.snapshot())
		}
	}
}

// exactly fails unless the ids received so far are want.
func (r *received) exactly(t *testing.T, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := r.snapshot(); !slices.Equal(got, want) {
		t.Fatalf("received %v, want exactly %v", got, want)
	}
}

func pluginStatus(t *testing.T, env *brokertest.Env, name string) server.PluginStatus {
	t.Helper()
	res, err := env.Broker.Admin().Run(t.Context(), "plugins.list", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, ps := range res.([]server.PluginStatus) {
		if ps.Name == name {
			return ps
		}
	}
	t.Fatalf("plugin %s not listed in %+v", name, res)
	return server.PluginStatus{}
}

func reload(t *testing.T, env *brokertest.Env) server.ReloadResult {
	t.Helper()
	res, err := env.Broker.Admin().Run(t.Context(), "plugins.reload", nil)
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	return res.(server.ReloadResult)
}

// TestClassFilter starts a broker whose config names the jsonfield example
// as the CLASS expression type. A push consumer of the official client
// subscribing with CLASS "region=eu" receives exactly the matching
// messages; after a reload to another module (classfold, which compares
// without regard to case) in the middle of the traffic, the next pulls
// filter with the new module.
func TestClassFilter(t *testing.T) {
	jsonfield := guestbuild.Module(t, "../jsonfield")
	classfold := guestbuild.Module(t, "testdata/classfold")
	list := &pluginList{}
	list.set(classPlugin(jsonfield, ""))
	env := start(t, list)
	topic := brokertest.Name("Class")
	createTopic(t, env, topic, 1) // one queue: the consumer scans in send order
	p := env.Producer(t)

	got := newReceived()
	group := brokertest.Name("cg")
	c := env.PushConsumer(t, group)
	// The client puts the type in its heartbeat's subscription and sends
	// none with its pulls, so the broker filters with the heartbeat's.
	if err := c.Subscribe(topic, consumer.MessageSelector{Type: "CLASS", Expression: "region=eu"}, got.listener); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, group, true, topic)

	send(t, env, p, topic, `{"id":"a1","region":"eu"}`, `{"id":"a2","region":"EU"}`, `{"id":"a3","region":"us"}`,
		`not json`, `{"id":"a4","tier":"gold","region":"eu"}`, `{"id":"a5"}`, `{"id":"a6","region":"eu"}`)
	got.waitFor(t, "a1", "a4", "a6")
	got.exactly(t, "a1", "a4", "a6")
	if ps := pluginStatus(t, env, "class"); ps.Version != "1.0.0" || ps.Generation != 1 || ps.Calls == 0 || ps.Errors != 0 {
		t.Fatalf("before the reload: %+v", ps)
	}

	list.set(classPlugin(classfold, ""))
	if r := reload(t, env); !slices.Equal(r.Reloaded, []string{"class"}) {
		t.Fatalf("reload: %+v", r)
	}
	send(t, env, p, topic, `{"id":"b1","region":"eu"}`, `{"id":"b2","region":"EU"}`, `{"id":"b3","region":"us"}`, `{"id":"b4","region":"Eu"}`)
	got.waitFor(t, "b1", "b2", "b4")
	got.exactly(t, "a1", "a4", "a6", "b1", "b2", "b4")
	ps := pluginStatus(t, env, "class")
	if ps.Version != "2.0.0" || ps.Generation != 2 || ps.ExpressionType != "CLASS" {
		t.Fatalf("after the reload: %+v", ps)
	}

	// An expression the plugin rejects is refused at subscription time.
	if _, err := env.PluginRegistry().Filter("CLASS").Filter("no-equals-sign"); err == nil {
		t.Fatal("a bad expression compiled")
	}
}

// TestFilterErrorHoldsSubscription has a filter fail on one message: the
// subscription waits there (no later message is delivered and no offset
// moves past it) while another group on the same topic keeps receiving;
// once a reload makes the plugin decide, the subscription resumes at that
// message.
func TestFilterErrorHoldsSubscription(t *testing.T) {
	classfold := guestbuild.Module(t, "testdata/classfold")
	list := &pluginList{}
	list.set(classPlugin(classfold, ""))
	env := start(t, list)
	topic := brokertest.Name("Hold")
	createTopic(t, env, topic, 1)
	p := env.Producer(t)

	got, all := newReceived(), newReceived()
	group, other := brokertest.Name("cg"), brokertest.Name("cg_all")
	c := env.PushConsumer(t, group)
	if err := c.Subscribe(topic, consumer.MessageSelector{Type: "CLASS", Expression: "region=eu"}, got.listener); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, group, true, topic)
	c2 := env.PushConsumer(t, other)
	if err := c2.Subscribe(topic, consumer.MessageSelector{}, all.listener); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c2, other, true, topic)

	send(t, env, p, topic, `{"id":"h0","region":"eu"}`, `{"id":"h1","region":"us"}`)
	got.waitFor(t, "h0")
	// The poisoned message is at queue offset 2.
	send(t, env, p, topic, `{"id":"h2","region":"eu","poison":true}`, `{"id":"h3","region":"eu"}`, `{"id":"h4","region":"eu"}`)
	all.waitFor(t, "h0", "h1", "h2", "h3", "h4")
	// The client retries a failed pull after 3 s; two failures show the
	// subscription waiting at the same message.
	brokertest.Eventually(t, 30*time.Second, "two failed filter calls", func() bool {
		return pluginStatus(t, env, "class").Errors >= 2
	})
	got.exactly(t, "h0")
	if off, ok := env.Store.ConsumerOffset(group, topic, 0); ok && off > 2 {
		t.Fatalf("committed offset %d is past the message the filter failed on (2)", off)
	}
	if ps := pluginStatus(t, env, "class"); ps.LastError == "" || ps.Traps != 0 || ps.Disabled {
		t.Fatalf("plugin status while failing: %+v", ps)
	}

	list.set(classPlugin(classfold, "poison=nomatch"))
	if r := reload(t, env); !slices.Equal(r.Reloaded, []string{"class"}) {
		t.Fatalf("reload: %+v", r)
	}
	got.waitFor(t, "h3", "h4")
	got.exactly(t, "h0", "h3", "h4")
}

// TestAllocate asks the allocate admin command for the queues of a group
// served by the sticky example and of a group left to the built-in
// strategy.
func TestAllocate(t *testing.T) {
	sticky := guestbuild.Module(t, "../sticky")
	stickyGroup, plainGroup := brokertest.Name("cg_sticky"), brokertest.Name("cg_plain")
	list := &pluginList{}
	list.set(server.Plugin{Options: wasm.Options{Name: "sticky", Kind: wasm.KindAllocate, Module: sticky}, Groups: []string{stickyGroup}})
	env := start(t, list)
	topic := brokertest.Name("Alloc")
	createTopic(t, env, topic, 8)
	for _, g := range []string{stickyGroup, stickyGroup, plainGroup} {
		c := env.PushConsumer(t, g)
		if err := c.Subscribe(topic, consumer.MessageSelector{}, newReceived().listener); err != nil {
			t.Fatal(err)
		}
		env.StartConsumer(t, c, g, true, topic)
	}
	brokertest.Eventually(t, 10*time.Second, "two consumers in the sticky group", func() bool {
		return len(env.Broker.View().ConsumerIDs(stickyGroup)) == 2
	})

	allocate := func(group, client string) (server.AllocateResult, error) {
		args, _ := json.Marshal(server.AllocateArgs{Group: group, Topic: topic, ClientID: client})
		res, err := env.Broker.Admin().Run(t.Context(), "allocate", args)
		if err != nil {
			return server.AllocateResult{}, err
		}
		return res.(server.AllocateResult), nil
	}
	owner := map[int32]string{}
	for _, id := range env.Broker.View().ConsumerIDs(stickyGroup) {
		res, err := allocate(stickyGroup, id)
		if err != nil {
			t.Fatal(err)
		}
		if res.Strategy != "plugin sticky" || len(res.Clients) != 2 || res.Error != "" || len(res.Queues) > 4 {
			t.Fatalf("sticky group: %+v", res)
		}
		for _, q := range res.Queues {
			if prev, dup := owner[q.QueueID]; dup || q.Topic != topic || q.BrokerName != broker.DefaultBrokerName {
				t.Fatalf("queue %+v given to %s (and %q)", q, id, prev)
			}
			owner[q.QueueID] = id
		}
	}
	if len(owner) != 8 {
		t.Fatalf("sticky assigned %d of 8 queues: %v", len(owner), owner)
	}

	// QUERY_ASSIGNMENT asks the same plugin: it beats the group's own
	// strategy and the client's.
	if err := env.Broker.Admin().SetGroupStrategy(stickyGroup, "AVG_BY_CIRCLE"); err != nil {
		t.Fatal(err)
	}
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	assigned := 0
	for _, id := range env.Broker.View().ConsumerIDs(stickyGroup) {
		body, _ := json.Marshal(qa.QueryAssignmentRequest{Topic: topic, ConsumerGroup: stickyGroup, ClientID: id, StrategyName: "AVG", MessageModel: qa.Clustering})
		resp, err := cl.Invoke(t.Context(), env.BrokerAddr, remoting.NewRequest(remoting.QueryAssignment, nil, body))
		if err != nil || resp.Code != remoting.Success {
			t.Fatalf("QUERY_ASSIGNMENT: %v %v", resp, err)
		}
		var got qa.QueryAssignmentResponse
		if err := json.Unmarshal(resp.Body, &got); err != nil {
			t.Fatal(err)
		}
		for _, a := range got.MessageQueueAssignments {
			if owner[a.MessageQueue.QueueID] != id {
				t.Fatalf("QUERY_ASSIGNMENT gave %s queue %d, sticky gave it to %s", id, a.MessageQueue.QueueID, owner[a.MessageQueue.QueueID])
			}
			assigned++
		}
	}
	if assigned != 8 {
		t.Fatalf("QUERY_ASSIGNMENT assigned %d of 8 queues", assigned)
	}

	plain := env.Broker.View().ConsumerIDs(plainGroup)
	res, err := allocate(plainGroup, plain[0])
	if err != nil {
		t.Fatal(err)
	}
	if res.Strategy != "AVG" || len(res.Queues) != 8 || res.Queues[7].QueueID != 7 {
		t.Fatalf("plain group: %+v", res)
	}
	if _, err := allocate(plainGroup, "nobody@1"); err == nil {
		t.Fatal("allocate for a client outside the group worked")
	}
	// The same strategies serve in-process callers.
	queues := make([]broker.Queue, 8)
	for i := range queues {
		queues[i] = broker.Queue{Topic: topic, BrokerName: broker.DefaultBrokerName, QueueID: int32(i)}
	}
	idx, err := env.Allocator().Allocate(t.Context(), plainGroup, plain[0], plain, queues)
	if err != nil || fmt.Sprint(idx) != "[0 1 2 3 4 5 6 7]" {
		t.Fatalf("Allocator for the plain group: %v %v", idx, err)
	}
}

// TestOverrideSQL92 maps the SQL92 expression type to the sql92 example:
// the official client's SQL92 subscriptions are then filtered by the
// module. Whether a built-in type is replaced is fixed at startup, so a
// reload that would hand SQL92 back to the native filter is refused and
// the plugin keeps serving.
func TestOverrideSQL92(t *testing.T) {
	sql92 := guestbuild.Module(t, "../sql92")
	list := &pluginList{}
	list.set(server.Plugin{Options: wasm.Options{Name: "sql92-guest", Kind: wasm.KindFilter, ExpressionType: "sql92", Module: sql92}})
	env := start(t, list)
	topic := brokertest.Name("SQL")
	createTopic(t, env, topic, 1)
	p := env.Producer(t)

	got := newReceived()
	group := brokertest.Name("cg")
	c := env.PushConsumer(t, group)
	if err := c.Subscribe(topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: "region = 'eu' AND n > 2"}, got.listener); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, group, true, topic)
	for i, region := range []string{"eu", "us", "eu", "eu", "us"} {
		m := primitive.NewMessage(topic, fmt.Appendf(nil, `{"id":"s%d"}`, i))
		m.WithProperty("region", region)
		m.WithProperty("n", fmt.Sprint(i))
		if _, err := p.SendSync(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	got.waitFor(t, "s3")
	got.exactly(t, "s3")
	if ps := pluginStatus(t, env, "sql92-guest"); ps.ExpressionType != "SQL92" || ps.Calls == 0 {
		t.Fatalf("the plugin did not filter: %+v", ps)
	}

	list.set()
	_, err := env.Broker.Admin().Run(t.Context(), "plugins.reload", nil)
	if err == nil || !strings.Contains(err.Error(), `plugin "sql92-guest"`) || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("reload dropping the SQL92 override: %v", err)
	}
	if ps := pluginStatus(t, env, "sql92-guest"); ps.Generation != 1 {
		t.Fatalf("after the refused reload: %+v", ps)
	}
}

// TestClassFilterTakeover moves the CLASS type between plugins under a
// running subscription: another plugin taking the type over filters the
// next pulls; while no plugin serves it the subscription holds, and it
// resumes where it stopped when one does again.
func TestClassFilterTakeover(t *testing.T) {
	jsonfield := guestbuild.Module(t, "../jsonfield")
	classfold := guestbuild.Module(t, "testdata/classfold")
	list := &pluginList{}
	list.set(classPlugin(jsonfield, ""))
	env := start(t, list)
	topic := brokertest.Name("Takeover")
	createTopic(t, env, topic, 1)
	p := env.Producer(t)
	got := newReceived()
	group := brokertest.Name("cg")
	c := env.PushConsumer(t, group)
	if err := c.Subscribe(topic, consumer.MessageSelector{Type: "CLASS", Expression: "region=eu"}, got.listener); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, group, true, topic)
	send(t, env, p, topic, `{"id":"a1","region":"eu"}`, `{"id":"a2","region":"EU"}`, `{"id":"a3","region":"eu"}`)
	got.waitFor(t, "a1", "a3")

	// Another plugin (another name and module) takes CLASS over.
	takeover := classPlugin(classfold, "")
	takeover.Name = "class-fold"
	list.set(takeover)
	if r := reload(t, env); !slices.Equal(r.Added, []string{"class-fold"}) || !slices.Equal(r.Removed, []string{"class"}) {
		t.Fatalf("takeover: %+v", r)
	}
	send(t, env, p, topic, `{"id":"b1","region":"EU"}`, `{"id":"b2","region":"us"}`, `{"id":"b3","region":"eu"}`)
	got.waitFor(t, "b1", "b3")

	// No plugin serves CLASS: the subscription holds.
	list.set()
	if r := reload(t, env); !slices.Equal(r.Removed, []string{"class-fold"}) {
		t.Fatalf("removal: %+v", r)
	}
	send(t, env, p, topic, `{"id":"c1","region":"eu"}`, `{"id":"c2","region":"us"}`)
	list.set(classPlugin(jsonfield, ""))
	if r := reload(t, env); !slices.Equal(r.Added, []string{"class"}) {
		t.Fatalf("re-adding: %+v", r)
	}
	send(t, env, p, topic, `{"id":"c3","region":"eu"}`)
	got.waitFor(t, "c1", "c3")
	got.exactly(t, "a1", "a3", "b1", "b3", "c1", "c3")
}
