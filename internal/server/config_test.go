package server

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/store"
)

// TestReadmeConfig decodes the YAML examples of the README and of docs/:
// every key they document still reads.
func TestReadmeConfig(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	yamlBlock := regexp.MustCompile("(?s)```yaml\n(.*?)```")
	var blocks int
	var reference []byte // the configuration file's example in docs/operations.md
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, b := range yamlBlock.FindAllSubmatch(doc, -1) {
			if bytes.HasPrefix(b[1], []byte("scrape_configs:")) || bytes.HasPrefix(b[1], []byte("# prometheus.yml")) {
				continue // Prometheus's config, not the broker's
			}
			blocks++
			if reference == nil && filepath.Base(f) == "operations.md" {
				reference = b[1]
			}
			var c Config
			if err := c.decode(b[1], "/etc/rmq"); err != nil {
				t.Errorf("%s yaml block %d: %v\n%s", filepath.Base(f), i, err, b[1])
			}
		}
	}
	if blocks < 3 || reference == nil {
		t.Fatalf("%d yaml blocks in the README and docs/, none in docs/operations.md", blocks)
	}
	var c Config
	if err := c.decode(reference, "/etc/rmq"); err != nil {
		t.Fatal(err)
	}
	if c.Store.Flush != store.FlushSync || c.Store.FlushInterval != 500*time.Millisecond || c.Broker.MaxMessageSize != 4<<20 ||
		c.Broker.DisableAutoCreateTopic || c.Broker.DisablePropertyFilter || len(c.Broker.Topics) != 1 || c.Plugins[0].Path != "/etc/rmq/jsonfield.wasm" {
		t.Fatalf("docs/operations.md config %+v", c)
	}
}

// TestConfigSwitchesAndMovedKeys reads the keys stated the other way round
// and those that moved.
func TestConfigSwitchesAndMovedKeys(t *testing.T) {
	var c Config
	err := c.decode([]byte("flush: async\nautoCreateTopic: false\nenablePropertyFilter: false\nnatsBridge: {urls: [nats://a:1], outboxMaxBytes: 1KiB}\n"), "")
	if err != nil || c.Store.Flush != store.FlushAsync || !c.Broker.DisableAutoCreateTopic || !c.Broker.DisablePropertyFilter ||
		c.Broker.OutboxMaxBytes != 1024 || c.NATSBridge == nil {
		t.Fatalf("%v %+v", err, c)
	}
	var g Config
	err = g.decode([]byte("autoCreateSubscriptionGroup: false\ngroups:\n  - {name: billing, retryMaxTimes: 3, retryQueueNums: 2, consumeBroadcastEnable: false}\n  - {name: audit, attributes: {priority.factor: \"50\"}}\n"), "")
	if err != nil || !g.Broker.DisableAutoCreateGroup || len(g.Broker.Groups) != 2 ||
		!reflect.DeepEqual(g.Broker.Groups[0], broker.GroupOptions{Name: "billing", RetryMaxTimes: 3, RetryQueueNums: 2, DisableConsumeBroadcast: true}) ||
		!reflect.DeepEqual(g.Broker.Groups[1], broker.GroupOptions{Name: "audit", Attributes: map[string]string{"priority.factor": "50"}}) {
		t.Fatalf("groups: %v %+v", err, g.Broker.Groups)
	}
	if err := c.decode([]byte("flush: async\nstore: {flush: sync}\n"), ""); err == nil {
		t.Fatal("flush given twice: no error")
	}
}

// TestConfigRemotingLimits reads the remoting: section onto the broker
// port's limits.
func TestConfigRemotingLimits(t *testing.T) {
	var c Config
	err := c.decode([]byte("remoting: {maxConns: 500, maxConnsPerAddr: 50, idleTimeout: 2m, frameReadTimeout: 20s, maxQueuedBytesPerConn: 8MiB, maxFrameSize: 4MiB}\n"), "")
	r := c.Remoting
	if err != nil || r.MaxConns != 500 || r.MaxConnsPerAddr != 50 || r.IdleTimeout != 2*time.Minute ||
		r.FrameReadTimeout != 20*time.Second || r.MaxQueuedBytesPerConn != 8<<20 || r.MaxFrameSize != 4<<20 {
		t.Fatalf("%v %+v", err, r)
	}
	if err := c.decode([]byte("remoting: {maxConn: 1}\n"), ""); err == nil {
		t.Fatal("unknown key under remoting: no error")
	}
}

// TestConfigGRPC reads the gRPC endpoint's address and section.
func TestConfigGRPC(t *testing.T) {
	var c Config
	err := c.decode([]byte("grpcListen: 127.0.0.1:9081\ngrpc: {maxSessions: 5, maxWaiting: 7, sessionExpiry: 1m, longPolling: 10s, advertise: 10.0.0.1:9081}\ngroups:\n  - {name: orders, consumeMessageOrderly: true}\n"), "")
	g := c.GRPC
	if err != nil || c.GRPCListen != "127.0.0.1:9081" || g.MaxSessions != 5 || g.MaxWaiting != 7 || g.SessionExpiry != time.Minute ||
		g.LongPolling != 10*time.Second || g.Advertise != "10.0.0.1:9081" || !c.Broker.Groups[0].ConsumeMessageOrderly {
		t.Fatalf("%v %+v", err, c)
	}
}
