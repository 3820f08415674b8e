package server_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/cluster"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// TestClusterRefusals: a set's member refuses an unauthenticated raft
// port off loopback, and a natsBridge section the bridge would refuse
// (its bridge starts only when it leads, so the start checks it).
func TestClusterRefusals(t *testing.T) {
	base := func() server.Config {
		return server.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: brokertest.Logger(),
			Cluster: &cluster.Options{SetName: "s", NodeID: "a", Peers: []cluster.Peer{{ID: "a", Addr: "10.1.2.3:7000"}}}}
	}
	if _, err := server.Start(base()); !errors.Is(err, server.ErrInsecure) || !strings.Contains(err.Error(), "raft") {
		t.Fatalf("a plain raft port off loopback: %v", err)
	}
	c := base()
	c.Cluster.Peers[0].Addr = "127.0.0.1:0"
	c.NATSBridge = &server.BridgeOptions{Mode: "pigeon"}
	if _, err := server.Start(c); err == nil || !strings.Contains(err.Error(), `mode "pigeon"`) || !strings.Contains(err.Error(), "URL is required") {
		t.Fatalf("a bad natsBridge section on a member: %v", err)
	}
	c = base()
	c.Cluster.Peers = nil
	if _, err := server.Start(c); err == nil || !strings.Contains(err.Error(), "peers") {
		t.Fatalf("no peers: %v", err)
	}
}
