package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestPooledPullBodiesIntact pulls, over several connections at once, bodies
// small enough to be copied into the connection's buffer and large enough
// to be written by reference, and checks every record of every answer: a
// pull body handed back to the pool before the connection was done with
// it would show up as another pull's records.
func TestPooledPullBodiesIntact(t *testing.T) {
	env := brokertest.Start(t)
	const topic, queues, perQueue = "Pooled", 4, 96
	createTopic(t, env, topic, queues)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	body := func(q, i int) []byte {
		size := 600 // 32 of them: about 24 KiB, copied
		if q%2 == 1 {
			size = 4000 // 32 of them: about 130 KiB, written by reference
		}
		return bytes.Repeat([]byte(fmt.Sprintf("q%d-m%03d|", q, i)), size/9)
	}
	for q := range queues {
		for i := range perQueue {
			r := sendRaw(t, cl, env, map[string]string{"topic": topic, "queueId": strconv.Itoa(q)}, body(q, i))
			if r.Code != remoting.Success {
				t.Fatalf("send: %v", r)
			}
		}
	}

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := remoting.NewClient(remoting.ClientOptions{})
			defer c.Close()
			for round := range 10 {
				q := (w + round) % queues
				for off := 0; off < perQueue; {
					resp, err := c.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.PullMessage, map[string]string{
						"consumerGroup": "pooled", "topic": topic, "queueId": strconv.Itoa(q), "queueOffset": strconv.Itoa(off),
						"maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
						"subscription": "*", "expressionType": "TAG"}, nil))
					if err != nil {
						errs <- err
						return
					}
					if resp.Code != remoting.Success {
						errs <- fmt.Errorf("pull q%d@%d: code %d %s", q, off, resp.Code, resp.Remark)
						return
					}
					recs, err := message.DecodeRecords(resp.Body)
					if err != nil {
						errs <- err
						return
					}
					for _, r := range recs {
						if want := body(q, off); !bytes.Equal(r.Body(), want) || r.QueueOffset() != int64(off) {
							errs <- fmt.Errorf("pull q%d: record at %d holds %.12q, want %.12q", q, off, r.Body(), want)
							return
						}
						off++
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
