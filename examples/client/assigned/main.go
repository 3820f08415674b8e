// Command assigned starts three consumers of one group and prints the
// queues each holds. The consumers do not allocate queues themselves: they
// ask the broker (QUERY_ASSIGNMENT), which allocates with the strategy
// configured for the group there: a built-in one set with
//
//	broker admin consumers strategy --group assigned-demo --strategy AVG_BY_CIRCLE
//
// or an allocate WASM plugin named for the group in the broker's config.
// Changing it takes effect at the consumers' next rebalance, with no
// change to this program. It exits 0 once every queue of the topic is
// held by exactly one consumer.
//
//	go run ./examples/client/assigned --namesrv 127.0.0.1:9876
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/rmq-go/rmq/client"
)

func main() {
	namesrv := flag.String("namesrv", "127.0.0.1:9876", "name server address")
	topic := flag.String("topic", "AssignedDemo", "topic to use (created with 8 queues if missing)")
	group := flag.String("group", "assigned-demo", "consumer group")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, *namesrv, *topic, *group, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "assigned:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, namesrv, topic, group string, out io.Writer) error {
	// A send creates the topic if it does not exist yet.
	p, err := client.NewProducer(client.ProducerOptions{
		Client: client.ClientOptions{NameServers: []string{namesrv}, InstanceName: "assigned-producer"},
		Group:  "assigned-producer", DefaultTopicQueueNums: 8,
	})
	if err != nil {
		return err
	}
	if err := p.Start(); err != nil {
		return err
	}
	defer p.Shutdown(context.Background())
	if _, err := p.SendSync(ctx, client.NewMessage(topic, []byte("hello"))); err != nil {
		return err
	}

	var consumers []*client.PushConsumer
	for i := range 3 {
		c, err := client.NewPushConsumer(client.ConsumerOptions{
			Client:            client.ClientOptions{NameServers: []string{namesrv}, InstanceName: fmt.Sprintf("assigned-%d", i)},
			Group:             group,
			RebalanceInterval: time.Second,
		}, client.ConcurrentFunc(func(context.Context, *client.ConcurrentContext, []*client.MessageExt) client.ConsumeResult {
			return client.ConsumeSuccess
		}))
		if err != nil {
			return err
		}
		if err := c.Subscribe(topic, client.Selector{}); err != nil {
			return err
		}
		if err := c.Start(); err != nil {
			return err
		}
		defer c.Shutdown(context.Background())
		consumers = append(consumers, c)
	}
	queues, err := p.Queues(ctx, topic)
	if err != nil {
		return err
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		holders := map[client.MessageQueue]int{}
		for _, c := range consumers {
			for _, q := range c.Assigned(topic) {
				holders[q]++
			}
		}
		// Settled: every queue held once, and (the group's membership
		// having reached every member) no consumer without a share.
		settled := len(holders) == len(queues)
		for _, n := range holders {
			settled = settled && n == 1
		}
		for _, c := range consumers {
			settled = settled && (len(c.Assigned(topic)) > 0 || len(queues) < len(consumers))
		}
		if settled {
			for _, c := range consumers {
				fmt.Fprintf(out, "%s holds", c.ClientID())
				for _, q := range c.Assigned(topic) {
					fmt.Fprintf(out, " %d", q.QueueID)
				}
				fmt.Fprintln(out)
			}
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("queues not settled: %v", holders)
		}
	}
}
