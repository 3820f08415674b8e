package broker_test

import (
	"context"
	"encoding/json"
	"net"
	"testing"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
	"github.com/rmq-go/rmq/filters/tag"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// startReplica serves a replica (ReplicaID 1 of set-x) on opts.Store or a
// store of its own, with opts otherwise; both stop when the test ends.
func startReplica(t *testing.T, opts broker.Options) (*store.Store, *broker.Broker, net.Listener) {
	t.Helper()
	if opts.Store == nil {
		st := storetest.Open(t, store.Options{Dir: t.TempDir(), Logger: brokertest.Logger()})
		t.Cleanup(func() { st.Close() })
		opts.Store = st
	}
	st := opts.Store
	opts.ReplicaID, opts.BrokerName, opts.Logger = 1, "set-x", brokertest.Logger()
	b, err := broker.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go b.Serve(ln)
	t.Cleanup(func() { b.Shutdown(context.Background()) })
	return st, b, ln
}

// TestReplicaAdmin: a replica refuses admin commands as writes, except
// those registered with HandleReplicaAdmin, which it serves.
func TestReplicaAdmin(t *testing.T) {
	_, b, ln := startReplica(t, broker.Options{})
	b.Admin().Handle("test.write", func(context.Context, json.RawMessage) (any, error) { return "written", nil })
	b.Admin().HandleOnReplica("test.where", func(context.Context, json.RawMessage) (any, error) { return "ask the leader", nil })

	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	call := func(command string) *remoting.Command {
		t.Helper()
		resp, err := cl.Invoke(context.Background(), ln.Addr().String(), remoting.NewRequest(broker.AdminCode, map[string]string{"command": command}, nil))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := call("test.write"); r.Code != remoting.NoPermission {
		t.Fatalf("a write command on a replica: code %d %s", r.Code, r.Remark)
	}
	if r := call("test.where"); r.Code != remoting.Success || string(r.Body) != `"ask the leader"` {
		t.Fatalf("a replica's command: code %d %s %s", r.Code, r.Remark, r.Body)
	}
	if r := call("dlq.list"); r.Code != remoting.NoPermission {
		t.Fatalf("a built-in command on a replica: code %d %s", r.Code, r.Remark)
	}
}

// TestReplicaServesTopicCreatedSince: a replica serves reads of a topic
// its leader created after the replica's topic table was loaded (the
// table is reloaded only at each registration), as soon as the topic is
// in its store.
func TestReplicaServesTopicCreatedSince(t *testing.T) {
	st, _, ln := startReplica(t, broker.Options{
		Filters: map[string]broker.FilterFactory{broker.ExpressionTag: broker.FilterFactoryFunc(func(expr string) (broker.Filter, error) {
			return tag.Compile(expr)
		})}})

	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	pull := func() *remoting.Command {
		t.Helper()
		r, err := cl.Invoke(context.Background(), ln.Addr().String(), remoting.NewRequest(remoting.PullMessage, map[string]string{
			"consumerGroup": "G", "topic": "Since", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
			"sysFlag": "4", "subscription": "*", "expressionType": "TAG", "commitOffset": "0", "suspendTimeoutMillis": "0"}, nil))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// Served once: the replica loaded its table when it started.
	if r := pull(); r.Code != remoting.TopicNotExist {
		t.Fatalf("pull of a topic that does not exist yet: code %d %s", r.Code, r.Remark)
	}

	// What the leader's topic creation and a send leave in the store.
	tc, err := json.Marshal(broker.TopicConfig{TopicName: "Since", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6, TopicFilterType: "SINGLE_TAG"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutMeta("topic/Since", tc); err != nil {
		t.Fatal(err)
	}
	if err := st.Append([]*message.Message{storetest.Msg("Since", 0, "hello")}); err != nil {
		t.Fatal(err)
	}
	r := pull()
	if r.Code != remoting.Success {
		t.Fatalf("pull from the replica: code %d %s", r.Code, r.Remark)
	}
	recs, err := message.DecodeRecords(r.Body)
	if err != nil || len(recs) != 1 || string(recs[0].Body()) != "hello" {
		t.Fatalf("pull from the replica: %d records, %v", len(recs), err)
	}
}

// TestReplicaPullPastItsEnd: a replica serves pulls while its set has no
// master, and may have applied less than the master had served. A pull
// past its end is then "nothing new yet", held and answered with the
// consumer's own offset, not PULL_OFFSET_MOVED, after which a Java
// consumer drops the queue until the master is back (RocketMQ's slave
// answers the same way). A pull before its first message still moves.
func TestReplicaPullPastItsEnd(t *testing.T) {
	st := storetest.Open(t, store.Options{Dir: t.TempDir(), Logger: brokertest.Logger()})
	t.Cleanup(func() { st.Close() })
	master, err := broker.New(broker.Options{Store: st, BrokerName: "set-x", Logger: brokertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := master.CreateTopic(broker.TopicConfig{TopicName: "Lagging", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	for _, r := range master.SendLocalBatch([]broker.LocalSend{{Topic: "Lagging", BornTimestamp: 1, Body: []byte("a")}, {Topic: "Lagging", BornTimestamp: 1, Body: []byte("b")}}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	master.Shutdown(context.Background())
	_, _, ln := startReplica(t, broker.Options{Store: st,
		Filters: map[string]broker.FilterFactory{broker.ExpressionTag: broker.FilterFactoryFunc(func(expr string) (broker.Filter, error) {
			return tag.Compile(expr)
		})}})

	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	pull := func(offset, sysFlag, suspend string) *remoting.Command {
		t.Helper()
		resp, err := cl.Invoke(context.Background(), ln.Addr().String(), remoting.NewRequest(remoting.PullMessage, map[string]string{
			"consumerGroup": "lagging-g", "topic": "Lagging", "queueId": "0", "queueOffset": offset, "maxMsgNums": "32",
			"sysFlag": sysFlag, "commitOffset": "0", "suspendTimeoutMillis": suspend, "subscription": "*", "expressionType": "TAG"}, nil))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, c := range []struct{ sysFlag, suspend string }{{"4", "0"}, {"6", "50"}} {
		r := pull("5", c.sysFlag, c.suspend)
		if r.Code != remoting.PullNotFound || r.Get("nextBeginOffset") != "5" || r.Get("maxOffset") != "2" {
			t.Fatalf("a pull at 5 of a replica holding 2 (sysFlag %s): code %d %s next %s max %s", c.sysFlag, r.Code, r.Remark, r.Get("nextBeginOffset"), r.Get("maxOffset"))
		}
	}
	if r := pull("1", "4", "0"); r.Code != remoting.Success || r.Get("nextBeginOffset") != "2" {
		t.Fatalf("a pull at 1: code %d next %s", r.Code, r.Get("nextBeginOffset"))
	}
	if r := pull("-1", "4", "0"); r.Code != remoting.PullOffsetMoved {
		t.Fatalf("a pull at -1: code %d, want PULL_OFFSET_MOVED", r.Code)
	}
}
