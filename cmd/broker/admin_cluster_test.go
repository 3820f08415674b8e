package main

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestAdminClusterList lists the name server's broker with its figures
// after an official producer stored messages.
func TestAdminClusterList(t *testing.T) {
	env := brokertest.Start(t)
	admin := adminRunner(env)
	topic := brokertest.Name("T")
	p := env.Producer(t)
	const n = 3
	for i := 0; i < n; i++ {
		if res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("m"))); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send: %v %v", res, err)
		}
	}

	var rows []clusterBroker
	adminJSON(t, admin, &rows, "cluster", "list", "--namesrv", env.NamesrvAddr)
	if len(rows) != 1 {
		t.Fatalf("cluster list: %+v", rows)
	}
	b := rows[0]
	if b.Cluster != broker.DefaultClusterName || b.BrokerName != broker.DefaultBrokerName || b.BrokerID != 0 || b.Addr != env.BrokerAddr ||
		b.Version != "V4_9_8" || b.Topics != len(env.Broker.Topics()) || b.Connections < 2 || b.MsgPutTotal < n || b.BootTimestamp <= 0 || b.Error != "" {
		t.Fatalf("cluster list: %+v", b)
	}
	code, out, errs := admin("cluster", "list", "--namesrv", env.NamesrvAddr)
	if code != 0 || !strings.Contains(out, env.BrokerAddr) || !strings.Contains(out, broker.DefaultClusterName) || !strings.Contains(out, "UPTIME") {
		t.Fatalf("cluster list table: %d\n%s%s", code, out, errs)
	}

	// Without a name server: the broker at --broker alone.
	adminJSON(t, admin, &rows, "cluster", "list", "--namesrv", "")
	if len(rows) != 1 || rows[0].Addr != env.BrokerAddr || rows[0].Cluster != "" || rows[0].Topics != b.Topics {
		t.Fatalf("cluster list without a name server: %+v", rows)
	}
	// A broker that does not answer is listed, and the exit code says so.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	code, out, errs = runCmd("admin", "--broker", dead, "cluster", "list", "--namesrv", "")
	if code != 1 || !strings.Contains(out, "unreachable") || !strings.Contains(errs, dead) {
		t.Fatalf("a dead broker: %d\n%s%s", code, out, errs)
	}
}
