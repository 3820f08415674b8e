package broker_test

import (
	"context"
	"encoding/json"
	"net"
	"testing"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestReplicaAdmin: a replica refuses admin commands as writes, except
// those registered with HandleReplicaAdmin, which it serves.
func TestReplicaAdmin(t *testing.T) {
	st := storetest.Open(t, store.Options{Dir: t.TempDir(), Logger: brokertest.Logger()})
	defer st.Close()
	b, err := broker.New(broker.Options{Store: st, ReplicaID: 1, BrokerName: "set-x", Logger: brokertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go b.Serve(ln)
	defer b.Shutdown(context.Background())
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
