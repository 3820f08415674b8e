package grpcserver_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// nodeDir holds the Node.js cases and their locked dependencies.
const nodeDir = "testdata/node"

// runNode runs a case of testdata/node/e2e.js against e with env set, and
// returns its output. Without node_modules (npm ci there) it skips, unless
// RMQ_REQUIRE_NODE=1, as .ci/run sets.
func runNode(t *testing.T, e *env, name string, kv ...string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(nodeDir, "node_modules", "rocketmq-client-nodejs"))
	if err != nil || modErr != nil {
		if os.Getenv("RMQ_REQUIRE_NODE") == "1" {
			t.Fatalf("node or %s/node_modules missing (run npm ci there): %v %v", nodeDir, err, modErr)
		}
		t.Skip("node or testdata/node/node_modules missing (npm ci there)")
	}
	c, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(c, node, "e2e.js", name)
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), append([]string{"RMQ_ENDPOINT=" + e.GRPCAddr, "HOME=" + t.TempDir()}, kv...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node e2e.js %s: %v\n%s", name, err, out)
	}
	return string(out)
}

func TestNodeProducerAndSimpleConsumer(t *testing.T) {
	e := start(t)
	topic, fifo, group := brokertest.Name("NodeT"), brokertest.Name("NodeFifo"), brokertest.Name("nodeg")
	e.createTopic(t, topic, 4)
	e.createTopic(t, fifo, 4)
	out := runNode(t, e, "producer-simple", "RMQ_TOPIC="+topic, "RMQ_FIFO_TOPIC="+fifo, "RMQ_GROUP="+group)
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("node output: %s", out)
	}
}

// TestNodePriority: the Node client's priority messages are received by
// its SimpleConsumer highest priority first (e2e.js, case priority).
func TestNodePriority(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("NodePrio"), brokertest.Name("nodeprio")
	e.createPriorityTopic(t, topic, 4)
	out := runNode(t, e, "priority", "RMQ_TOPIC="+topic, "RMQ_GROUP="+group)
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("node output: %s", out)
	}
}

func TestNodePushConsumer(t *testing.T) {
	// The push consumer's shutdown waits for its receive in flight, which
	// long-polls for as long as the settings say: keep it short.
	e := start(t, func(c *server.Config) { c.GRPC.LongPolling = 2 * time.Second })
	topic, group := brokertest.Name("NodePush"), brokertest.Name("nodepush")
	e.createTopic(t, topic, 4)
	for i := range 5 {
		e.send(t, msg(topic, "push-"+itoa(int32(i)), "t", "push-"+itoa(int32(i))))
	}
	out := runNode(t, e, "push", "RMQ_TOPIC="+topic, "RMQ_GROUP="+group, "RMQ_N=5")
	if testing.Verbose() {
		t.Log(out)
	}
	if !strings.Contains(out, `"bodies":["push-0","push-1","push-2","push-3","push-4"]`) {
		t.Fatalf("node output: %s", out)
	}
}

// TestNodePushConsumerRetry: a message the Node push consumer fails
// comes back after the first step of its group's retry ladder (1 s, to
// within 0.5 s), not when the 10 s long poll the consumer waits on ends.
// The client reads no CUSTOMIZED backoff and asks for no delay: the
// broker holds the message for the ladder's step.
func TestNodePushConsumerRetry(t *testing.T) {
	e := start(t, func(c *server.Config) { c.GRPC.LongPolling = 10 * time.Second })
	topic, group := brokertest.Name("NodeRetry"), brokertest.Name("noderetry")
	e.createTopic(t, topic, 2)
	for i := range 2 {
		e.send(t, msg(topic, "retry-"+itoa(int32(i)), "t", "retry-"+itoa(int32(i))))
	}
	out := runNode(t, e, "push-retry", "RMQ_TOPIC="+topic, "RMQ_GROUP="+group, "RMQ_N=2")
	var res struct {
		OK       bool               `json:"ok"`
		Gaps     map[string]int64   `json:"gaps"`
		Attempts map[string][]int32 `json:"attempts"`
	}
	line := out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]
	if err := json.Unmarshal([]byte(line), &res); err != nil || !res.OK || len(res.Gaps) != 2 {
		t.Fatalf("node output (%v): %s", err, out)
	}
	for body, ms := range res.Gaps {
		gap := time.Duration(ms) * time.Millisecond
		if gap < time.Second || gap > 1500*time.Millisecond {
			t.Errorf("%s came back %v after its failed delivery, want 1 s to 1.5 s", body, gap)
		}
		if a := res.Attempts[body]; !slices.Equal(a, []int32{1, 2}) {
			t.Errorf("%s delivery attempts %v, want [1 2]", body, a)
		}
	}
	t.Logf("failed messages came back after %v ms", res.Gaps)
}

func TestNodeTransactionChecker(t *testing.T) {
	e := start(t, func(c *server.Config) {
		c.Broker.TxnTimeout, c.Broker.TxnCheckInterval = time.Second, time.Second
	})
	topic, group := brokertest.Name("NodeTxn"), brokertest.Name("nodetxn")
	e.createTopic(t, topic, 2)
	out := runNode(t, e, "txn-check", "RMQ_TOPIC="+topic, "RMQ_GROUP="+group)
	if !strings.Contains(out, `"checked":["orphan"]`) {
		t.Fatalf("node output: %s", out)
	}
}

// TestNodeCrossProtocol: the official 4.x Go producer's messages reach
// the Node push consumer, and the Node producer's reach the official 4.x
// Go consumer.
func TestNodeCrossProtocol(t *testing.T) {
	e := start(t, func(c *server.Config) { c.GRPC.LongPolling = 2 * time.Second })
	toNode, fromNode := brokertest.Name("ToNode"), brokertest.Name("FromNode")
	e.createTopic(t, toNode, 2)
	e.createTopic(t, fromNode, 2)

	p := e.Producer(t)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown() })
	for i := range 3 {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(toNode, []byte("go-"+itoa(int32(i))))); err != nil {
			t.Fatal(err)
		}
	}
	out := runNode(t, e, "push", "RMQ_TOPIC="+toNode, "RMQ_GROUP="+brokertest.Name("nodepush"), "RMQ_N=3")
	if !strings.Contains(out, `"bodies":["go-0","go-1","go-2"]`) {
		t.Fatalf("node push consumer: %s", out)
	}

	got := nodeProduced(t, e, fromNode, 3)
	seen := map[string]bool{}
	for len(seen) < 3 {
		m := brokertest.Wait(t, got, 30*time.Second, "the Node producer's messages")
		seen[string(m.Body)+"|"+m.GetKeys()] = true
	}
	for i := range 3 {
		if k := "node-" + itoa(int32(i)) + "|key-" + itoa(int32(i)); !seen[k] {
			t.Fatalf("4.x consumer got %v, not %s", seen, k)
		}
	}
}

// nodeProduced runs the Node producer's case, n messages tagged node to
// topic through e's endpoint, and returns what an official 4.x push
// consumer of a new group receives of them.
func nodeProduced(t *testing.T, e *env, topic string, n int) <-chan *primitive.MessageExt {
	t.Helper()
	out := runNode(t, e, "produce", "RMQ_TOPIC="+topic, "RMQ_N="+itoa(int32(n)))
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("node producer: %s", out)
	}
	group := brokertest.Name("gopull")
	c := e.PushConsumer(t, group)
	got := make(chan *primitive.MessageExt, 2*n)
	if err := c.Subscribe(topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "node"}, func(_ context.Context, ms ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range ms {
			got <- m
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	e.StartConsumer(t, c, group, true, topic)
	return got
}
