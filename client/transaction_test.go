package client

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// testListener decides by the body's prefix: "commit-" and "rollback-" at
// once; "check-" unknown at first and committed when checked.
type testListener struct {
	mu     sync.Mutex
	checks []*MessageExt
}

func (l *testListener) ExecuteLocal(_ context.Context, m *Message) LocalTransactionState {
	switch b := string(m.Body); {
	case strings.HasPrefix(b, "commit-"):
		return TransactionCommit
	case strings.HasPrefix(b, "rollback-"):
		return TransactionRollback
	case strings.HasPrefix(b, "panic-"):
		panic("local transaction failed")
	}
	return TransactionUnknown
}

func (l *testListener) CheckLocal(m *MessageExt) LocalTransactionState {
	l.mu.Lock()
	l.checks = append(l.checks, m)
	l.mu.Unlock()
	return TransactionCommit
}

func (l *testListener) checked() []*MessageExt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*MessageExt(nil), l.checks...)
}

func startTransactionProducer(t *testing.T, e testEnv, l TransactionListener) *TransactionProducer {
	t.Helper()
	p, err := NewTransactionProducer(ProducerOptions{Client: e.options(), Group: brokertest.Name("txg")}, l)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return p
}

// bodies lists the bodies of msgs.
func bodies(msgs []*MessageExt) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.Body))
	}
	return out
}

func TestTransactionCommitRollbackAndCheck(t *testing.T) {
	e := startBroker(t, func(c *server.Config) {
		c.Broker.TxnTimeout = 300 * time.Millisecond
		c.Broker.TxnCheckInterval = 200 * time.Millisecond
	})
	topic := brokertest.Name("Tx")
	e.createTopic(t, topic, 1)
	l := &testListener{}
	p := startTransactionProducer(t, e, l)
	in := testInstance(t, p.Producer)
	ctx := context.Background()

	want := map[string]LocalTransactionState{
		"rollback-1": TransactionRollback,
		"check-1":    TransactionUnknown,
		"panic-1":    TransactionUnknown,
		"commit-1":   TransactionCommit,
	}
	ids := map[string]string{}
	for _, body := range []string{"rollback-1", "check-1", "panic-1", "commit-1"} {
		m := NewMessage(topic, []byte(body)).WithTag("tx")
		res, err := p.SendTransactional(ctx, m)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if res.State != want[body] || res.Status != SendOK || res.MsgID != m.Property(message.PropertyUniqKey) {
			t.Fatalf("%s: result %+v state %s", body, res.SendResult, res.State)
		}
		if m.Property(message.PropertyTransactionPrepared) != "" {
			t.Fatalf("%s: the caller's message was marked half", body)
		}
		ids[body] = res.MsgID
	}

	// The committed message appears at once; the unknown ones once the
	// broker has checked them and CheckLocal committed them.
	var got []*MessageExt
	brokertest.Eventually(t, 20*time.Second, "three committed messages", func() bool {
		got = pullTopic(t, in, topic)
		return len(got) >= 3
	})
	seen := map[string]bool{}
	for _, m := range got {
		b := string(m.Body)
		if seen[b] {
			t.Fatalf("%s delivered twice: %v", b, bodies(got))
		}
		seen[b] = true
		if m.MsgID != ids[b] || m.Tag() != "tx" || m.Property(message.PropertyTransactionPrepared) != "" || m.SysFlag&message.SysFlagTxMask != message.SysFlagTxCommit {
			t.Fatalf("committed %s: id %s (sent %s) props %v sysFlag %#x", b, m.MsgID, ids[b], m.Properties, m.SysFlag)
		}
	}
	if len(got) != 3 || !seen["commit-1"] || !seen["check-1"] || !seen["panic-1"] {
		t.Fatalf("visible: %v; want commit-1, check-1 and panic-1", bodies(got))
	}
	checked := map[string]bool{}
	for _, m := range l.checked() {
		checked[string(m.Body)] = true
		if m.Property(message.PropertyProducerGroup) != p.opts.Group {
			t.Fatalf("checked message of group %q", m.Property(message.PropertyProducerGroup))
		}
	}
	if !checked["check-1"] || !checked["panic-1"] || checked["commit-1"] || checked["rollback-1"] {
		t.Fatalf("checked %v; want check-1 and panic-1 only", checked)
	}

	// The rolled-back message never shows: a commit sent after it is
	// visible, and it is still not.
	if _, err := p.SendTransactional(ctx, NewMessage(topic, []byte("commit-2"))); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, 10*time.Second, "commit-2", func() bool {
		got = pullTopic(t, in, topic)
		return len(got) >= 4
	})
	for _, m := range got {
		if string(m.Body) == "rollback-1" {
			t.Fatalf("rolled-back message delivered: %v", bodies(got))
		}
	}
}

func TestTransactionCheckQueueBounded(t *testing.T) {
	p, err := NewTransactionProducer(ProducerOptions{Client: ClientOptions{NameServers: []string{"127.0.0.1:1"}, Logger: brokertest.Logger()}, Group: "g"}, &testListener{})
	if err != nil {
		t.Fatal(err)
	}
	// Workers not started: every check waits in the queue.
	msg := &MessageExt{Message: Message{Topic: "T"}}
	done := make(chan struct{})
	go func() {
		for range checkQueueSize + 10 {
			p.checkTransaction("127.0.0.1:1", msg, 0, 0, "")
		}
		close(done)
	}()
	brokertest.Wait(t, done, 10*time.Second, "checkTransaction to return with a full queue")
	if n := len(p.checks); n != checkQueueSize {
		t.Fatalf("%d checks queued, want the bound %d", n, checkQueueSize)
	}

	plain, err := NewProducer(ProducerOptions{Client: ClientOptions{NameServers: []string{"127.0.0.1:1"}, Logger: brokertest.Logger()}, Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	plain.checkTransaction("127.0.0.1:1", msg, 0, 0, "") // logged and ignored, no panic
	if _, err := (&TransactionProducer{plain}).SendTransactional(context.Background(), NewMessage("T", []byte("x"))); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("transactional send before Start: %v", err)
	}
}
