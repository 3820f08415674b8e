package client

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/internal/brokertest"
)

// produceKeyed sends perKey messages for each of keys with the official
// producer, hashing keys to queues; bodies are "<key>:<seq>".
func (e testEnv) produceKeyed(t testing.TB, topic string, keys []string, perKey int) {
	t.Helper()
	p := e.Producer(t, producer.WithQueueSelector(producer.NewHashQueueSelector()))
	for i := range perKey {
		for _, k := range keys {
			m := primitive.NewMessage(topic, []byte(fmt.Sprintf("%s:%d", k, i))).WithShardingKey(k)
			if _, err := p.SendSync(context.Background(), m); err != nil {
				t.Fatalf("send: %v", err)
			}
		}
	}
}

// orderLog records, per consumer and key, the sequence numbers handled.
type orderLog struct {
	mu   sync.Mutex
	seqs map[string]map[string][]int // consumer → key → seqs
	seen map[string]bool             // body
	ch   chan struct{}
}

func newOrderLog() *orderLog {
	return &orderLog{seqs: map[string]map[string][]int{}, seen: map[string]bool{}, ch: make(chan struct{}, 1)}
}

func (l *orderLog) add(who string, msgs []*MessageExt) {
	l.mu.Lock()
	for _, m := range msgs {
		key, seq, _ := strings.Cut(string(m.Body), ":")
		n, _ := strconv.Atoi(seq)
		if l.seqs[who] == nil {
			l.seqs[who] = map[string][]int{}
		}
		l.seqs[who][key] = append(l.seqs[who][key], n)
		l.seen[string(m.Body)] = true
	}
	l.mu.Unlock()
	select {
	case l.ch <- struct{}{}:
	default:
	}
}

func (l *orderLog) distinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen)
}

func (l *orderLog) waitDistinct(t testing.TB, n int, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for l.distinct() < n {
		select {
		case <-l.ch:
		case <-deadline:
			t.Fatalf("saw %d distinct messages of %d", l.distinct(), n)
		}
	}
}

// check fails unless every consumer saw each key's messages in order and
// without gaps: a consumer that takes a queue over may start again at the
// last committed offset, but never goes backwards or skips.
func (l *orderLog) check(t testing.TB) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for who, keys := range l.seqs {
		for key, seqs := range keys {
			for i := 1; i < len(seqs); i++ {
				if seqs[i] != seqs[i-1]+1 && seqs[i] != seqs[i-1] {
					t.Errorf("%s handled key %s out of order: ... %d then %d", who, key, seqs[i-1], seqs[i])
					break
				}
			}
		}
	}
}

func TestOrderlyInOrderWithSuspend(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 2)
	keys := []string{"k0", "k1", "k2", "k3"}
	e.produceKeyed(t, topic, keys, 25)
	log := newOrderLog()
	var suspended sync.Once
	var reconsumed []int32
	startPush(t, e.consumerOptions(group), topic, Selector{}, OrderlyFunc(func(_ context.Context, oc *OrderlyContext, msgs []*MessageExt) OrderlyResult {
		if string(msgs[0].Body) == "k1:10" {
			reconsumed = append(reconsumed, msgs[0].ReconsumeTimes)
			var s bool
			suspended.Do(func() { s = true })
			if s {
				oc.SuspendTime = 10 * time.Millisecond
				return OrderlySuspend
			}
		}
		log.add("c", msgs)
		return OrderlySuccess
	}))
	log.waitDistinct(t, 100, 30*time.Second)
	log.check(t)
	if len(reconsumed) != 2 || reconsumed[1] != 1 {
		t.Errorf("suspended message's reconsume times over its attempts: %v, want [0 1]", reconsumed)
	}
}

// TestOrderlyConsumerKilled kills one of two orderly consumers mid-stream
// (its connections close without unlocking or committing): the other
// takes its queues over, and no key is ever handled out of order or lost.
func TestOrderlyConsumerKilled(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 4)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	const perKey = 30
	log := newOrderLog()
	handler := func(who string) OrderlyFunc {
		return func(_ context.Context, _ *OrderlyContext, msgs []*MessageExt) OrderlyResult {
			log.add(who, msgs)
			time.Sleep(2 * time.Millisecond) // work, so the kill lands mid-stream
			return OrderlySuccess
		}
	}
	optsA := e.consumerOptions(group)
	optsA.RebalanceInterval = 200 * time.Millisecond
	optsA.PersistInterval = 100 * time.Millisecond
	a := startPush(t, optsA, topic, Selector{}, handler("A"))
	e.produceKeyed(t, topic, keys, perKey)
	log.waitDistinct(t, 60, 30*time.Second)
	optsB := optsA
	optsB.Client = e.options()
	startPush(t, optsB, topic, Selector{}, handler("B"))
	log.waitDistinct(t, 120, 30*time.Second)
	a.kill()
	log.waitDistinct(t, len(keys)*perKey, 60*time.Second)
	log.check(t)
}

// kill stops p the way a crash would, as far as the broker can tell: its
// connections close with no unlock, commit or unregister.
func (p *PushConsumer) kill() {
	p.stopOnce.Do(func() {
		close(p.quit)
		p.qmu.Lock()
		for _, qs := range p.qmu.queues {
			qs.pq.dropped.Store(true)
			qs.cancel()
		}
		p.qmu.Unlock()
		p.wg.Wait()
		p.in.release()
	})
}

// TestOrderlyLockLossStopsConsumption takes a queue's lock away from a
// consumer: after the next renewal it must stop consuming that queue, and
// resume once the lock can be had again.
func TestOrderlyLockLossStopsConsumption(t *testing.T) {
	e := startBroker(t)
	topic, group := brokertest.Name("T"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	log := newOrderLog()
	c := startPush(t, e.consumerOptions(group), topic, Selector{}, OrderlyFunc(func(_ context.Context, _ *OrderlyContext, msgs []*MessageExt) OrderlyResult {
		log.add("c", msgs)
		return OrderlySuccess
	}))
	e.produceKeyed(t, topic, []string{"k"}, 5)
	log.waitDistinct(t, 5, 30*time.Second)
	q := c.held(topic)[0]

	// Another client of the group takes the lock while ours is released.
	thief, err := acquireInstance(e.options())
	if err != nil {
		t.Fatal(err)
	}
	defer thief.release()
	ctx := context.Background()
	if err := c.in.unlockBatch(ctx, q.BrokerName, group, []MessageQueue{q}); err != nil {
		t.Fatal(err)
	}
	if got, err := thief.lockBatch(ctx, q.BrokerName, group, []MessageQueue{q}); err != nil || len(got) != 1 {
		t.Fatalf("thief lock: %v %v", got, err)
	}
	c.renewLocks()
	c.qmu.Lock()
	pq := c.qmu.queues[q].pq
	c.qmu.Unlock()
	if pq.locked.Load() {
		t.Fatal("still locked after the broker refused the renewal")
	}
	e.produceKeyed(t, topic, []string{"k"}, 10) // k:0..9 again; k:5.. are new bodies
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if n := log.distinct(); n != 5 {
			t.Fatalf("consumed %d distinct messages while the lock was lost", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := thief.unlockBatch(ctx, q.BrokerName, group, []MessageQueue{q}); err != nil {
		t.Fatal(err)
	}
	c.renewLocks()
	log.waitDistinct(t, 10, 30*time.Second)
}
