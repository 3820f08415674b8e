// Command quickstart sends ten messages with this project's Go client and
// reads them back with a push consumer, then exits 0.
//
//	go run ./cmd/broker &                      # a broker and name server on 127.0.0.1
//	go run ./examples/client/quickstart --namesrv 127.0.0.1:9876
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
	topic := flag.String("topic", "QuickStart", "topic to use")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, *namesrv, *topic, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, namesrv, topic string, out io.Writer) error {
	cl := client.ClientOptions{NameServers: []string{namesrv}}

	// Produce: the topic is created on the first send.
	cl.InstanceName = "quickstart-producer"
	p, err := client.NewProducer(client.ProducerOptions{Client: cl, Group: "quickstart-producer"})
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer p.Shutdown(context.Background())
	const n = 10
	run := strconv.FormatInt(time.Now().UnixNano(), 36) // tells this run's messages apart
	for i := range n {
		msg := client.NewMessage(topic, []byte(fmt.Sprintf("hello %d", i))).WithTag(run).WithKeys("order-" + strconv.Itoa(i))
		res, err := p.SendSync(ctx, msg)
		if err != nil {
			return fmt.Errorf("send: %w", err)
		}
		fmt.Fprintf(out, "sent %s to %s offset %d\n", res.MsgID, res.Queue, res.QueueOffset)
	}

	// Consume: a push consumer subscribed to this run's tag.
	cl.InstanceName = "quickstart-consumer"
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
		done = make(chan struct{})
	)
	c, err := client.NewPushConsumer(client.ConsumerOptions{Client: cl, Group: "quickstart-consumer", ConsumeFrom: client.ConsumeFromFirstOffset},
		client.ConcurrentFunc(func(_ context.Context, _ *client.ConcurrentContext, msgs []*client.MessageExt) client.ConsumeResult {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				if !seen[m.MsgID] {
					seen[m.MsgID] = true
					fmt.Fprintf(out, "received %s %q\n", m.MsgID, m.Body)
				}
			}
			if len(seen) == n {
				select {
				case <-done:
				default:
					close(done)
				}
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
	select {
	case <-done:
		fmt.Fprintf(out, "all %d messages received\n", n)
		return nil
	case <-ctx.Done():
		return fmt.Errorf("received %d of %d messages: %w", len(seen), n, ctx.Err())
	}
}
