// Command orderly sends the events of a few orders, each order's events to
// one queue (hash of the order id), and consumes them with an orderly push
// consumer, which sees every order's events in the order they were sent.
// It exits 0 once every event arrived in order.
//
//	go run ./examples/client/orderly --namesrv 127.0.0.1:9876
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rmq-go/rmq/client"
)

func main() {
	namesrv := flag.String("namesrv", "127.0.0.1:9876", "name server address")
	topic := flag.String("topic", "OrderEvents", "topic to use")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, *namesrv, *topic, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "orderly:", err)
		os.Exit(1)
	}
}

var steps = []string{"created", "paid", "packed", "shipped", "delivered"}

func run(ctx context.Context, namesrv, topic string, out io.Writer) error {
	cl := client.ClientOptions{NameServers: []string{namesrv}, InstanceName: "orderly-producer"}
	p, err := client.NewProducer(client.ProducerOptions{Client: cl, Group: "orderly-producer"})
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer p.Shutdown(context.Background())
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	orders := []string{"o1", "o2", "o3", "o4"}
	hash := client.NewHashSelector()
	for _, step := range steps {
		for _, o := range orders {
			// The order id picks the queue, so one order's events stay in order.
			msg := client.NewMessage(topic, []byte(o+" "+step)).WithTag(run)
			if _, err := p.SendSyncTo(ctx, hash, o, msg); err != nil {
				return fmt.Errorf("send: %w", err)
			}
		}
	}

	var (
		mu   sync.Mutex
		next = map[string]int{} // order → index of the next expected step
		bad  error
		done = make(chan struct{})
	)
	cl.InstanceName = "orderly-consumer"
	c, err := client.NewPushConsumer(client.ConsumerOptions{Client: cl, Group: "orderly-consumer", ConsumeFrom: client.ConsumeFromFirstOffset},
		client.OrderlyFunc(func(_ context.Context, _ *client.OrderlyContext, msgs []*client.MessageExt) client.OrderlyResult {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				order, step, _ := strings.Cut(string(m.Body), " ")
				if want := steps[next[order]]; step != want && bad == nil {
					bad = fmt.Errorf("order %s: got %s, want %s", order, step, want)
				}
				next[order]++
				fmt.Fprintf(out, "%s %s (queue %d)\n", order, step, m.QueueID)
			}
			total := 0
			for _, n := range next {
				total += n
			}
			if total == len(orders)*len(steps) {
				close(done)
			}
			return client.OrderlySuccess
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
	case <-ctx.Done():
		return ctx.Err()
	}
	mu.Lock()
	defer mu.Unlock()
	if bad != nil {
		return bad
	}
	fmt.Fprintln(out, "every order's events arrived in order")
	return nil
}
