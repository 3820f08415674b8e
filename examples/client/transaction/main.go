// Command transaction sends three transactional messages: one committed at
// once, one rolled back, and one whose local transaction is still unknown
// when the send returns, which the broker resolves by asking the producer
// (check-back). It consumes the topic and exits 0 once the committed two
// have arrived; the rolled-back one never does.
//
//	go run ./examples/client/transaction --namesrv 127.0.0.1:9876
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/rmq-go/rmq/client"
)

func main() {
	namesrv := flag.String("namesrv", "127.0.0.1:9876", "name server address")
	topic := flag.String("topic", "Payments", "topic to use")
	flag.Parse()
	// The broker's first check-back comes after 6 s by default.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, *namesrv, *topic, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "transaction:", err)
		os.Exit(1)
	}
}

// ledger is the local state the transactions change: a payment is
// recorded by its message body.
type ledger struct {
	mu   sync.Mutex
	paid map[string]bool
}

// ExecuteLocal runs the local transaction of a half message.
func (l *ledger) ExecuteLocal(_ context.Context, m *client.Message) client.LocalTransactionState {
	switch body := string(m.Body); {
	case m.Property("outcome") == "commit":
		l.record(body)
		return client.TransactionCommit
	case m.Property("outcome") == "rollback":
		return client.TransactionRollback
	default:
		// Still in doubt: record it, and let the check-back find it.
		l.record(body)
		return client.TransactionUnknown
	}
}

// CheckLocal answers the broker's check-back from the local state.
func (l *ledger) CheckLocal(m *client.MessageExt) client.LocalTransactionState {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.paid[string(m.Body)] {
		return client.TransactionCommit
	}
	return client.TransactionRollback
}

func (l *ledger) record(body string) {
	l.mu.Lock()
	l.paid[body] = true
	l.mu.Unlock()
}

func run(ctx context.Context, namesrv, topic string, out io.Writer) error {
	cl := client.ClientOptions{NameServers: []string{namesrv}, InstanceName: "tx-producer"}
	p, err := client.NewTransactionProducer(client.ProducerOptions{Client: cl, Group: "tx-producer"}, &ledger{paid: map[string]bool{}})
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer p.Shutdown(context.Background())
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	for _, outcome := range []string{"commit", "rollback", "unknown"} {
		msg := client.NewMessage(topic, []byte("payment "+outcome+" "+run)).WithTag(run).SetProperty("outcome", outcome)
		res, err := p.SendTransactional(ctx, msg)
		if err != nil {
			return fmt.Errorf("send: %w", err)
		}
		fmt.Fprintf(out, "half message %s: local transaction says %v\n", res.MsgID, res.State)
	}

	got := make(chan string, 3)
	cl.InstanceName = "tx-consumer"
	c, err := client.NewPushConsumer(client.ConsumerOptions{Client: cl, Group: "tx-consumer", ConsumeFrom: client.ConsumeFromFirstOffset},
		client.ConcurrentFunc(func(_ context.Context, _ *client.ConcurrentContext, msgs []*client.MessageExt) client.ConsumeResult {
			for _, m := range msgs {
				got <- m.Property("outcome")
			}
			return client.ConsumeSuccess
		}))
	if err != nil {
		return err
	}
	if err := c.Subscribe(topic, client.Selector{Expression: run}); err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return err
	}
	defer c.Shutdown(context.Background())
	seen := map[string]bool{}
	for len(seen) < 2 {
		select {
		case o := <-got:
			if o == "rollback" {
				return fmt.Errorf("a rolled-back message was delivered")
			}
			seen[o] = true
			fmt.Fprintf(out, "received the %s payment\n", o)
		case <-ctx.Done():
			return fmt.Errorf("received %v: %w", seen, ctx.Err())
		}
	}
	fmt.Fprintln(out, "committed payments delivered; the rolled-back one was not")
	return nil
}
