package server_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// buildGuest builds the example plugin in dir as an operator would.
func buildGuest(t *testing.T, dir string) []byte {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to build the plugin with")
	}
	out := filepath.Join(t.TempDir(), "plugin.wasm")
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", dir, err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// thirdTimeLucky leaves its transactions unknown until their third check,
// and commits them then.
type thirdTimeLucky struct {
	mu     sync.Mutex
	checks map[string][]int
}

func (l *thirdTimeLucky) ExecuteLocalTransaction(*primitive.Message) primitive.LocalTransactionState {
	return primitive.UnkonwnState
}

func (l *thirdTimeLucky) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	n, _ := strconv.Atoi(m.GetProperty(message.PropertyTransactionCheckTimes))
	l.mu.Lock()
	l.checks[string(m.Body)] = append(l.checks[string(m.Body)], n)
	l.mu.Unlock()
	if n >= 3 {
		return primitive.CommitMessageState
	}
	return primitive.UnkonwnState
}

func (l *thirdTimeLucky) checked(body string) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.checks[body])
}

// TestTxnCheckPlugin runs the example txnbackoff plugin as the check
// policy of one producer group: it gives up (rolls back) after two checks,
// where RocketMQ's rule, kept for another group, checks a third time and
// the transaction commits.
func TestTxnCheckPlugin(t *testing.T) {
	module := buildGuest(t, "../../examples/wasm/txnbackoff")
	pluginGroup, plainGroup := brokertest.Name("backoff"), brokertest.Name("plain")
	env := brokertest.Start(t, func(c *server.Config) {
		c.Broker.TxnTimeout = 100 * time.Millisecond
		c.Broker.TxnCheckInterval = 300 * time.Millisecond
		c.Broker.TxnCheckMax = 5
		c.Plugins = []server.Plugin{{
			Options: wasm.Options{Name: "txnbackoff", Kind: wasm.KindTxnCheck, Module: module,
				Config: []byte("max=2 base=100ms cap=200ms giveup=rollback")},
			Groups: []string{pluginGroup},
		}}
	})
	topic := brokertest.Name("TxnPlugin")
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	l := &thirdTimeLucky{checks: map[string][]int{}}
	for _, group := range []string{pluginGroup, plainGroup} {
		p, err := rocketmq.NewTransactionProducer(l, producer.WithNsResolver(env.Resolver()), producer.WithGroupName(group),
			producer.WithInstanceName(brokertest.Name("txnproducer")), producer.WithRetry(2))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Shutdown() })
		res, err := p.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte(group)))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send for %s: %v %v", group, res, err)
		}
	}
	// Each transaction is resolved by exactly one op marker, written with
	// its outcome: two markers, both resolved.
	brokertest.Eventually(t, 30*time.Second, "both transactions to be resolved", func() bool {
		_, markers := env.Store.QueueOffsets(broker.OpHalfTopic, 0)
		return markers >= 2
	})
	if got := l.checked(pluginGroup); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("the plugin's group was checked %v, want [1 2]", got)
	}
	if got := l.checked(plainGroup); !slices.Equal(got, []int{1, 2, 3}) {
		t.Errorf("the default group was checked %v, want [1 2 3]", got)
	}
	var bodies []string
	it := env.Store.NewQueueIter(topic, 0, store.IterOptions{StopOnCorruption: true})
	for ok := it.SeekGE(env.Store.MinOffset(topic, 0)); ok; ok = it.Next() {
		bodies = append(bodies, string(it.Record().Body()))
	}
	if err := it.Close(); err != nil || len(bodies) != 1 || bodies[0] != plainGroup {
		t.Fatalf("committed %q (%v), want the default group's one, %q", bodies, err, plainGroup)
	}
	if _, n := env.Store.QueueOffsets(broker.TxnCheckMaxTopic, 0); n != 0 {
		t.Errorf("the plugin's rollback kept %d messages in %s; only a discard does", n, broker.TxnCheckMaxTopic)
	}
}
