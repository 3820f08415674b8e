package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// startGRPCBroker runs a whole broker in-process with its remoting port
// and its gRPC endpoint on free ports.
func startGRPCBroker(t *testing.T) *brokertest.Env {
	t.Helper()
	return brokertest.Start(t, func(c *server.Config) {
		c.GRPCListen = "127.0.0.1:0"
		c.NamesrvListen = ""
	})
}

// grpcOptions are small settings for runs over gRPC against e.
func grpcOptions(e *brokertest.Env, topic string) Options {
	return Options{Protocol: ProtocolGRPC, Broker: e.GRPCAddr, Admin: e.BrokerAddr, Topic: topic,
		Conns: 3, InFlight: 2, Size: 100, Timeout: 10 * time.Second}
}

// TestGRPCProduceConsume sends over gRPC, one message a request and 32,
// checks with a remoting catch-up read that the topic holds exactly what
// was acknowledged, then consumes it all by POP; a second POP run of the
// same group finds nothing, since the first acknowledged everything.
func TestGRPCProduceConsume(t *testing.T) {
	e := startGRPCBroker(t)
	topic := brokertest.Name("BenchGRPC")
	ctx := t.Context()

	var out syncBuffer
	o := grpcOptions(e, topic)
	o.Count = 301 // not a multiple of the 6 senders
	sum, err := Produce(ctx, o, &out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Messages != 301 || sum.Requests != 301 || sum.Errors != 0 || sum.Bytes != 301*100 {
		t.Fatalf("single sends: %+v, want 301 messages and requests, no errors\n%s", sum, out.String())
	}
	if !strings.Contains(out.String(), "over gRPC") {
		t.Errorf("the header does not name gRPC: %q", out.String())
	}
	o.Batch, o.Count = 32, 100 // 3 requests of 32 and one of 4
	if sum, err = Produce(ctx, o, nil); err != nil {
		t.Fatal(err)
	}
	if sum.Messages != 100 || sum.Requests != 4 || sum.Errors != 0 {
		t.Fatalf("batched sends: %+v, want 100 messages in 4 requests", sum)
	}

	read, err := Consume(ctx, Options{Broker: e.BrokerAddr, Topic: topic, Conns: 2, Timeout: 10 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if read.Messages != 401 || read.Errors != 0 {
		t.Fatalf("the topic's 8 queues hold %d messages (%d errors), want the 401 acknowledged", read.Messages, read.Errors)
	}

	c := grpcOptions(e, topic)
	c.Group = brokertest.Name("popgroup")
	c.PullBatch = 32
	sum, err = Consume(ctx, c, &out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Messages != 401 || sum.Bytes != 401*100 || sum.Errors != 0 {
		t.Fatalf("POP consume: %+v, want 401 messages received and acknowledged", sum)
	}
	// The group's offset stays at its lowest message in flight: only
	// acknowledgements move it past them all.
	var committed int64
	for q := range int32(DefaultQueues) {
		off, _ := e.Store.ConsumerOffset(c.Group, topic, q)
		committed += off
	}
	if committed != 401 {
		t.Errorf("the group's offsets add up to %d, want 401: not every message was acknowledged", committed)
	}
	again, err := Consume(ctx, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.Messages != 0 || again.Errors != 0 {
		t.Errorf("a second POP run of the group got %d messages (%d errors), want none: all were acknowledged", again.Messages, again.Errors)
	}
}

// TestGRPCConsumeCount stops a POP run at Count, leaving the rest to the
// group.
func TestGRPCConsumeCount(t *testing.T) {
	e := startGRPCBroker(t)
	topic := brokertest.Name("BenchGRPCCount")
	o := grpcOptions(e, topic)
	o.Count, o.Batch = 200, 20
	if sum, err := Produce(t.Context(), o, nil); err != nil || sum.Messages != 200 {
		t.Fatalf("fill: %+v, %v", sum, err)
	}
	c := grpcOptions(e, topic)
	c.Group, c.PullBatch, c.Count = brokertest.Name("popcount"), 16, 50
	sum, err := Consume(t.Context(), c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Messages != 50 || sum.Errors != 0 {
		t.Fatalf("POP consume of 50: %+v", sum)
	}
	c.Count = 0
	if sum, err = Consume(t.Context(), c, nil); err != nil || sum.Messages != 150 {
		t.Fatalf("the rest: %+v, %v; want the 150 not acknowledged before", sum, err)
	}
}

func TestGRPCOptionsInvalid(t *testing.T) {
	_, err := Produce(context.Background(), Options{Protocol: "http"}, nil)
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), `Protocol "http"`) {
		t.Errorf("unknown protocol: %v", err)
	}
	_, err = Consume(context.Background(), Options{Protocol: ProtocolGRPC, PullBatch: 2000}, nil)
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "PullBatch 2000") {
		t.Errorf("receive batch over the broker's: %v", err)
	}
	_, err = Produce(context.Background(), Options{Protocol: ProtocolGRPC, Broker: "no-port"}, nil)
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "no-port") {
		t.Errorf("bad address: %v", err)
	}
	d := Options{Protocol: ProtocolGRPC, Broker: "10.1.2.3:9876"}.withDefaults(false)
	if d.Admin != "10.1.2.3:"+DefaultAdminPort {
		t.Errorf("Admin defaults to %q, want Broker's host with the remoting port", d.Admin)
	}
	if d := (Options{Protocol: ProtocolGRPC}).withDefaults(true); d.Broker != DefaultGRPCBroker {
		t.Errorf("gRPC Broker defaults to %q", d.Broker)
	}
}

// TestGRPCSetupFailures: a run that cannot create its topic, or whose
// broker has no gRPC endpoint, ends before the clock with an error.
func TestGRPCSetupFailures(t *testing.T) {
	e := startGRPCBroker(t)
	o := grpcOptions(e, brokertest.Name("BenchGRPCSetup"))
	o.Admin, o.Timeout = "127.0.0.1:1", 2*time.Second // nothing listens on port 1
	if _, err := Produce(t.Context(), o, nil); err == nil || !strings.Contains(err.Error(), "UPDATE_AND_CREATE_TOPIC") {
		t.Errorf("produce with no admin port: %v", err)
	}
	o = grpcOptions(e, brokertest.Name("BenchGRPCSetup"))
	o.Broker, o.Timeout = e.BrokerAddr, 2*time.Second // the remoting port speaks no gRPC
	if _, err := Consume(t.Context(), o, nil); err == nil {
		t.Error("a gRPC consume of the remoting port set up without an error")
	}
}
