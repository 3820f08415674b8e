package memory

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/bench"
	"github.com/rmq-go/rmq/internal/brokertest"
)

func TestOptions(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Broker: exe}.withDefaults()
	if o.Conns != DefaultConns || o.Messages != DefaultMessages || o.Polls != DefaultPolls ||
		o.Size != DefaultSize || o.Settle != DefaultSettle || o.TempDir == "" {
		t.Errorf("defaults: %+v", o)
	}
	if err := o.validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	if o.Conns != 10_000 || o.Messages != 10_000_000 || o.Polls != 1_000 {
		t.Errorf("the defaults are not the issue's 10,000 connections, 10 million messages, 1,000 polls: %+v", o)
	}
	q := Options{Broker: exe, Quick: true}.withDefaults()
	if q.Conns != QuickConns || q.Messages != QuickMessages || q.Polls != QuickPolls || q.Settle != QuickSettle {
		t.Errorf("quick defaults: %+v", q)
	}
	kept := Options{Broker: exe, Quick: true, Conns: 7, Messages: 9, Polls: 3, Settle: time.Second}.withDefaults()
	if kept.Conns != 7 || kept.Messages != 9 || kept.Polls != 3 || kept.Settle != time.Second {
		t.Errorf("quick overrode explicit values: %+v", kept)
	}

	bad := Options{Conns: maxConns + 1, Messages: -1, Size: maxSize + 1, Polls: (connsPerSource + 1) * pollsPerConn, Settle: pollSuspend}.withDefaults()
	err = bad.validate()
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("bad options: %v, want ErrInvalidOptions", err)
	}
	for _, want := range []string{"Broker", "Conns", "Messages", "Size", "Polls", "Settle"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s: %v", want, err)
		}
	}
	if _, err := Run(context.Background(), Options{Polls: -1}, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("Run with bad options: %v", err)
	}
}

func TestSourceAddr(t *testing.T) {
	for i, want := range map[int]string{0: "127.0.0.2", connsPerSource - 1: "127.0.0.2", connsPerSource: "127.0.0.3", maxConns - 1: "127.0.0.251"} {
		if got := sourceAddr(i).IP.String(); got != want {
			t.Errorf("sourceAddr(%d) = %s, want %s", i, got, want)
		}
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 10_000_000: "10,000,000", -1234: "-1,234"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
	for v, want := range map[float64]string{950: "950", 1234: "1.23k", 312_456: "312k", 1_250_000: "1.25M"} {
		if got := rate(v); got != want {
			t.Errorf("rate(%v) = %q, want %q", v, got, want)
		}
	}
	if got := delta(-3 << 20); got != "−3.0 MiB" {
		t.Errorf("delta = %q", got)
	}
	if got := perItem(10<<20, 10_000); got != "1.0 KiB" {
		t.Errorf("perItem = %q", got)
	}
	for n, want := range map[int64]string{512: "0.5 KiB", 3 << 20: "3.0 MiB", 5 << 29: "2.50 GiB"} {
		if got := size(n); got != want {
			t.Errorf("size(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestReport(t *testing.T) {
	r := Report{Settle: 2 * time.Second, Conns: 10_000, Size: 64, Stages: []Stage{
		{Name: "1. idle after start", Memory: bench.Memory{RSS: 20 << 20, HWM: 21 << 20}, Note: "empty data directory"},
		{Name: "2. 10,000 idle connections", Memory: bench.Memory{RSS: 120 << 20, HWM: 121 << 20}, Note: "+100.0 MiB"},
	}}
	got := r.String()
	for _, want := range []string{
		"| stage                      | RSS       | VmHWM     | note                 |\n",
		"| 1. idle after start        | 20.0 MiB  | 21.0 MiB  | empty data directory |\n",
		"| 2. 10,000 idle connections | 120.0 MiB | 121.0 MiB | +100.0 MiB           |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	words := strings.Join(strings.Fields(got), " ")
	for _, want := range []string{"read 2s after each stage", "maxConns (10064)", "from 20 loopback source addresses", "64-byte bodies"} {
		if !strings.Contains(words, want) {
			t.Errorf("report's note lacks %q:\n%s", want, got)
		}
	}
}

func TestConfig(t *testing.T) {
	p := &prober{o: Options{Conns: 10_000}}
	if got := p.config(); got != "remoting:\n  maxConns: 10064\n" {
		t.Errorf("config %q", got)
	}
}

// TestWire runs the probe's requests against a broker in this process:
// a connection from a second loopback address, a topic created, a max
// offset read, and a long-poll the broker holds.
func TestWire(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("other loopback addresses than 127.0.0.1 need configuration outside Linux")
	}
	env := brokertest.Start(t)
	ctx := context.Background()
	c, err := dial(ctx, env.BrokerAddr, sourceAddr(0))
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if got := c.nc.LocalAddr().String(); !strings.HasPrefix(got, "127.0.0.2:") {
		t.Errorf("local address %s, want 127.0.0.2", got)
	}
	if err := c.createTopic(probeTopic, probeQueues); err != nil {
		t.Fatal(err)
	}
	off, err := c.maxOffset(probeTopic, probeQueues-1)
	if err != nil || off != 0 {
		t.Fatalf("max offset of an empty queue: %d, %v", off, err)
	}
	if err := c.createTopic("no spaces allowed", 1); !errors.Is(err, ErrProbe) || !strings.Contains(err.Error(), "UPDATE_AND_CREATE_TOPIC answered") {
		t.Errorf("a request the broker refuses: %v, want ErrProbe naming it", err)
	}
	if err := c.send(remoting.PullMessage, pullHeader(probeGroup, probeTopic, 3, 0)); err != nil {
		t.Fatal(err)
	}
	if resp, err := c.recv(time.Now().Add(300 * time.Millisecond)); err == nil {
		t.Fatalf("the long-poll was answered at once: %s %s", remoting.ResponseCode(resp.Code), resp.Remark)
	}
	// A pull without the suspend bit is answered at once, so the silence
	// above was the hold.
	h := pullHeader(probeGroup, probeTopic, 3, 0)
	h["sysFlag"] = "4"
	c2, err := dial(ctx, env.BrokerAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.close()
	if err := c2.send(remoting.PullMessage, h); err != nil {
		t.Fatal(err)
	}
	resp, err := c2.recv(time.Now().Add(5 * time.Second))
	if err != nil || resp.Code != remoting.PullNotFound {
		t.Fatalf("a pull without suspend: %v, %v; want PULL_NOT_FOUND", resp, err)
	}
}
