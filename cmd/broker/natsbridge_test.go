package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
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

// TestNATSBridgeConfig maps the natsBridge section onto the bridge's
// options, refuses bad values, and drives "broker admin bridge status".
func TestNATSBridgeConfig(t *testing.T) {
	dir := t.TempDir()
	load := func(body string) (server.Config, error) {
		t.Helper()
		var cfg server.Config
		err := cfg.ReadFile(writeFile(t, dir, fmt.Sprintf("c%d.yaml", time.Now().UnixNano()), body))
		return cfg, err
	}
	cfg, err := load(`
natsBridge:
  urls: [nats://a:4222, nats://b:4222]
  mode: jetstream
  stream: OPS
  provision: true
  duplicateWindow: 5m
  subjectPrefix: ops.rmq
  kinds: [dlq]
  includeGroups: ["orders-*"]
  properties: [tenant]
  bodyCap: 4KiB
  maxInFlight: 64
  publishTimeout: 3s
  tls: {caFile: ca.pem}
  resend: true
  resendKeyTTL: 1h
`)
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.NATSBridge
	if o == nil || len(o.URLs) != 2 || o.Stream != "OPS" || !o.Provision || o.DuplicateWindow != 5*time.Minute || o.SubjectPrefix != "ops.rmq" ||
		o.Kinds[0] != "dlq" || o.IncludeGroups[0] != "orders-*" || o.Properties[0] != "tenant" || o.BodyCap != 4096 || o.MaxInFlight != 64 ||
		o.PublishTimeout != 3*time.Second || o.TLS.CAFile != filepath.Join(dir, "ca.pem") || !o.Resend || o.ResendKeyTTL != time.Hour {
		t.Fatalf("bridge options %+v", o)
	}
	if cfg, err := load("natsBridge:\n  enabled: false\n  urls: [nats://a:4222]\n"); err != nil || cfg.NATSBridge != nil {
		t.Fatalf("disabled bridge: %+v, %v", cfg.NATSBridge, err)
	}
	if cfg, err := load("natsBridge:\n  urls: [nats://a:4222]\n  omitBody: true\n"); err != nil || !cfg.NATSBridge.OmitBody {
		t.Fatalf("omitBody: %+v, %v", cfg.NATSBridge, err)
	}
	for body, want := range map[string]string{
		"natsBridge:\n  urls: [nats://a:1]\n  streem: X\n":            "streem",
		"natsBridge:\n  urls: [nats://a:1]\n  publishTimeout: soon\n": "soon",
	} {
		if _, err := load(body); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one naming %q", body, err, want)
		}
	}
	// Values the bridge refuses stop the broker when it starts, all at once.
	for body, want := range map[string][]string{
		"natsBridge:\n  urls: [nats://a:1]\n  mode: pigeon\n  kinds: [retry, sms]\n": {`mode "pigeon"`, `event kind "sms"`},
		"natsBridge:\n  mode: core\n":                                            {"URL is required"},
		"natsBridge:\n  urls: [nats://a:1]\n  bodyCap: 1KiB\n  omitBody: true\n": {"contradict"},
	} {
		cfg, err = load(body)
		if err != nil {
			t.Fatal(err)
		}
		cfg.DataDir, cfg.Listen, cfg.Logger = t.TempDir(), "127.0.0.1:0", brokertest.Logger()
		_, err := server.Start(cfg)
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %v, want one naming %q", body, err, w)
			}
		}
	}
}

func TestAdminBridgeStatus(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	dir := t.TempDir()
	path := writeFile(t, dir, "broker.yaml", fmt.Sprintf("natsBridge:\n  urls: [nats://127.0.0.1:%d]\n  provision: true\n", ns.Addr().(*net.TCPAddr).Port))
	cfg := server.Config{DataDir: filepath.Join(dir, "data"), Listen: "127.0.0.1:0", Logger: brokertest.Logger()}
	if err := cfg.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	env := brokertest.StartConfig(t, cfg)
	env.KnowGroup(t, "cg_2024")
	// The subject "bridge subject" prints is the one the event arrives on.
	code, out, errs := runCmd("admin", "--broker", env.BrokerAddr, "bridge", "subject", "--group", "cg_2024", "--topic", "Orders", "--kind", "dlq")
	subject, _, _ := strings.Cut(out, "\n")
	if code != 0 || subject != "rmq.DefaultCluster.dlq.cg_2024.Orders" || !strings.Contains(out, "resend service: rmq.DefaultCluster.ctl.resend") {
		t.Fatalf("bridge subject: exit %d: %q %s", code, out, errs)
	}
	if code, _, errs := runCmd("admin", "--broker", env.BrokerAddr, "bridge", "subject", "--kind", "parcel"); code == 0 || !strings.Contains(errs, `kind "parcel"`) {
		t.Fatalf("bridge subject --kind parcel: exit %d: %s", code, errs)
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	req := remoting.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "p", "topic": broker.RetryGroupTopicPrefix + "cg_2024", "queueId": "0", "sysFlag": "0",
		"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0", "reconsumeTimes": "17", "maxReconsumeTimes": "16",
		"properties": string(message.EncodeProperties(map[string]string{"UNIQ_KEY": "M1", "RETRY_TOPIC": "Orders"})),
	}, []byte("body"))
	if resp, err := cl.Invoke(context.Background(), env.BrokerAddr, req); err != nil || resp.Code != 0 {
		t.Fatalf("send: %v %v", resp, err)
	}
	brokertest.Eventually(t, 10*time.Second, "the event to be published", func() bool {
		return env.Bridge().Status().Published == 1
	})
	if m, err := sub.NextMsg(10 * time.Second); err != nil || m.Header.Get(natsbridge.HeaderRmqMsgID) != "M1" {
		t.Fatalf("on %s: %v, %v", subject, m, err)
	}
	code, out, errs = runCmd("admin", "--broker", env.BrokerAddr, "bridge", "status")
	if code != 0 {
		t.Fatalf("bridge status: exit %d: %s", code, errs)
	}
	for _, w := range []string{"CONNECTED", "jetstream, stream " + natsbridge.DefaultStream, "1 of 1", "published   1"} {
		if !strings.Contains(out, w) {
			t.Errorf("bridge status lacks %q:\n%s", w, out)
		}
	}
	code, out, _ = runCmd("admin", "--broker", env.BrokerAddr, "--json", "bridge", "status")
	if code != 0 || !strings.Contains(out, `"published":1`) {
		t.Fatalf("bridge status --json: exit %d, %s", code, out)
	}
}
