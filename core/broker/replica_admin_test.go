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

// startReplica serves a replica (ReplicaID 1 of set-x) on a store of its
// own, with opts otherwise; both stop when the test ends.
func startReplica(t *testing.T, opts broker.Options) (*store.Store, *broker.Broker, net.Listener) {
	t.Helper()
	st := storetest.Open(t, store.Options{Dir: t.TempDir(), Logger: brokertest.Logger()})
	t.Cleanup(func() { st.Close() })
	opts.Store, opts.ReplicaID, opts.BrokerName, opts.Logger = st, 1, "set-x", brokertest.Logger()
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
