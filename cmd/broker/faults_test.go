package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// faultRounds is how many kills each fault loop makes: 1 in the ordinary
// run (CI's short form: a round that loses the majority waits out the
// official client's 30 s route refresh), 20 with RMQ_LONG_FAULTS=1.
func faultRounds() int {
	if os.Getenv("RMQ_LONG_FAULTS") == "1" {
		return 20
	}
	return 1
}

// TestReplicatedSetKillLoops kills members of a set with SIGKILL while
// eight senders of the official client send synchronously: a follower
// each round, two members at once (the set loses its majority until they
// are back), and all three at once. After each loop every acknowledged
// message is stored once on every member, read back by queue offset from
// each member's store.
func TestReplicatedSetKillLoops(t *testing.T) {
	for _, loop := range []struct {
		name   string
		victim func(rs *replicatedSet) []*setMember
	}{
		{"follower", func(rs *replicatedSet) []*setMember {
			l := rs.leader()
			for _, m := range rs.members {
				if m != l {
					return []*setMember{m}
				}
			}
			return nil
		}},
		{"two", func(rs *replicatedSet) []*setMember {
			l := rs.leader()
			var out []*setMember
			for _, m := range rs.members {
				if m != l {
					out = append(out, m)
				}
			}
			return append(out[:1], l) // the leader and a follower
		}},
		{"all", func(rs *replicatedSet) []*setMember { return rs.members }},
	} {
		t.Run(loop.name, func(t *testing.T) {
			ns, err := server.StartNamesrv(server.Config{NamesrvListen: "127.0.0.1:0", Logger: brokertest.Logger()})
			if err != nil {
				t.Fatal(err)
			}
			defer ns.Shutdown(context.Background())
			// Names of this run alone: a loop run beside another (on
			// demand, or by another package's tests) can tell a
			// stranger's message from its own.
			rs := startSet(t, brokertest.Name("set-k"+loop.name), 3, []string{ns.NamesrvAddr})
			topic, tag := brokertest.Name("KillLoop"), brokertest.Name(loop.name)
			createSetTopic(t, rs, ns.NamesrvAddr, topic)
			// No retries: a send whose answer died with its master
			// may be stored, and a retry to the same address, served
			// again after the restart, would store it twice, as
			// RocketMQ's at-least-once sends may. Without them, a
			// message stored twice is the broker's doing.
			p := startSetProducer(t, ns.NamesrvAddr, "kill-"+loop.name, 0, 3*time.Second)
			defer p.Shutdown()
			var (
				mu    sync.Mutex
				acked = map[string]bool{}
				n     atomic.Int64
				stop  atomic.Bool
				wg    sync.WaitGroup
			)
			for w := range 8 {
				wg.Go(func() {
					for i := 0; !stop.Load(); i++ {
						body := fmt.Sprintf("%s-w%d-%d", tag, w, i)
						res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)))
						if err == nil && res.Status == primitive.SendOK {
							mu.Lock()
							acked[body] = true
							mu.Unlock()
							n.Add(1)
						}
					}
				})
			}
			rounds := faultRounds()
			for round := range rounds {
				before := n.Load()
				brokertest.Eventually(t, 60*time.Second, fmt.Sprintf("round %d: sends acknowledged", round), func() bool { return n.Load() >= before+100 })
				victims := loop.victim(rs)
				for _, m := range victims {
					rs.kill(m, syscall.SIGKILL)
				}
				for _, m := range victims {
					rs.start(m)
				}
				rs.leader()
			}
			before := n.Load()
			brokertest.Eventually(t, 60*time.Second, "sends acknowledged after the last round", func() bool { return n.Load() >= before+100 })
			stop.Store(true)
			wg.Wait()
			t.Logf("%d rounds killing %s", rounds, loop.name)
			rs.checkStoredOnce(topic, acked, false)
		})
	}
}
