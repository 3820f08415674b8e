package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
	"github.com/rmq-go/rmq/plugins/natsbridge"
)

// TestNATSBridgeWiring runs a broker with the bridge configured: dead
// letters reach NATS, `bridge.status` reports them, and the cursor
// survives a restart.
func TestNATSBridgeWiring(t *testing.T) {
	opts := &natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
	ns, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", ns.Addr().(*net.TCPAddr).Port)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	got := make(chan *nats.Msg, 16)
	if _, err := nc.ChanSubscribe("rmq.c1.dlq.>", got); err != nil {
		t.Fatal(err)
	}
	nc.Flush()

	env := brokertest.Start(t, func(c *server.Config) {
		c.Broker.ClusterName, c.Broker.BrokerName = "c1", "b1"
		c.NATSBridge = &server.BridgeOptions{URLs: []string{url}, Provision: true, CursorInterval: 10 * time.Millisecond}
		c.HTTPListen = "127.0.0.1:0"
	})
	env.KnowGroup(t, "cg")
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	deadLetter := func(id string) {
		props := message.EncodeProperties(map[string]string{"UNIQ_KEY": id, "RETRY_TOPIC": "Orders"})
		req := remoting.NewRequest(remoting.SendMessage, map[string]string{
			"producerGroup": "CLIENT_INNER_PRODUCER", "topic": broker.RetryGroupTopicPrefix + "cg", "defaultTopic": "TBW102",
			"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
			"flag": "0", "properties": string(props), "reconsumeTimes": "3", "unitMode": "false", "maxReconsumeTimes": "2", "batch": "false",
		}, []byte(id))
		resp, err := cl.Invoke(context.Background(), env.BrokerAddr, req)
		if err != nil || resp.Code != remoting.Success {
			t.Fatalf("send: %v %v", resp, err)
		}
	}
	deadLetter("A")
	m := brokertest.Wait(t, got, 10*time.Second, "the dead-letter event")
	if m.Subject != "rmq.c1.dlq.cg.Orders" || m.Header.Get(natsbridge.HeaderRmqMsgID) != "A" ||
		m.Header.Get(natsbridge.HeaderMsgID) != "c1-b1-"+env.Bridge().Status().Epoch+"-0" {
		t.Fatalf("event %s %v", m.Subject, m.Header)
	}
	status := func(env *brokertest.Env) natsbridge.Status {
		res, err := env.Broker.Admin().Run(context.Background(), server.BridgeStatusCommand, nil)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := json.Marshal(res)
		var st natsbridge.Status
		json.Unmarshal(data, &st)
		return st
	}
	brokertest.Eventually(t, 10*time.Second, "the cursor to pass the event", func() bool { return status(env).Cursor == 1 })
	if st := status(env); st.Connection != "CONNECTED" || st.Published != 1 || st.LagEvents != 0 {
		t.Fatalf("status %+v", st)
	}
	// The same figures on /metrics, and the dead letter behind them.
	_, metrics := get(t, env.Server, "/metrics")
	for _, line := range []string{
		"rmq_natsbridge_connected 1", "rmq_natsbridge_published_total 1", "rmq_natsbridge_lag_events 0",
		"rmq_dead_letters_total 1", `rmq_dlq_messages{group="cg"} 1`, `rmq_natsbridge_dropped_total{reason="expired"} 0`,
	} {
		if !strings.Contains(metrics, "\n"+line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}

	env = env.Restart(t)
	if c := env.Bridge().Status().Cursor; c != 1 {
		t.Fatalf("cursor after restart %d, want 1", c)
	}
	deadLetter("B")
	m = brokertest.Wait(t, got, 10*time.Second, "the event after the restart")
	if m.Header.Get(natsbridge.HeaderRmqMsgID) != "B" || m.Header.Get(natsbridge.HeaderMsgID) != "c1-b1-"+env.Bridge().Status().Epoch+"-1" {
		t.Fatalf("event %v", m.Header)
	}
	select {
	case m := <-got:
		t.Fatalf("event A again after the restart: %v", m.Header)
	default:
	}
}

func TestNATSBridgeBadConfig(t *testing.T) {
	_, err := server.Start(server.Config{
		DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: brokertest.Logger(),
		NATSBridge: &server.BridgeOptions{URLs: []string{"nats://127.0.0.1:1"}, Mode: "carrier-pigeon"},
	})
	if err == nil {
		t.Fatal("a bad bridge config was accepted")
	}
}
