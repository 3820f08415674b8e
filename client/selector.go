package client

import (
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	"github.com/rmq-go/rmq/core/message"
)

// QueueSelector picks the queue a message is sent to. queues are the
// topic's writable queues, never empty, in the same order in every process
// that has the same route (broker name, then queue id). arg is the value
// passed to Producer.SendSyncTo; it is nil for sends that use the
// producer's default selector. Select may be called from many goroutines
// at once, and must return one of queues.
type QueueSelector interface {
	Select(msg *Message, queues []MessageQueue, arg any) MessageQueue
}

// QueueSelectorFunc adapts a function to QueueSelector.
type QueueSelectorFunc func(msg *Message, queues []MessageQueue, arg any) MessageQueue

// Select calls f.
func (f QueueSelectorFunc) Select(msg *Message, queues []MessageQueue, arg any) MessageQueue {
	return f(msg, queues, arg)
}

// NewRoundRobinSelector returns a selector that walks each topic's queues
// in turn, starting at a random queue so that producers do not all begin
// with queue 0.
func NewRoundRobinSelector() QueueSelector { return &roundRobin{} }

// roundRobin keeps one counter per topic.
type roundRobin struct {
	counters sync.Map // topic → *atomic.Uint32
}

func (r *roundRobin) Select(msg *Message, queues []MessageQueue, _ any) MessageQueue {
	return queues[r.next(msg.Topic)%uint32(len(queues))]
}

// next returns topic's next counter value.
func (r *roundRobin) next(topic string) uint32 {
	c, ok := r.counters.Load(topic)
	if !ok {
		n := new(atomic.Uint32)
		n.Store(rand.Uint32())
		c, _ = r.counters.LoadOrStore(topic, n)
	}
	return c.(*atomic.Uint32).Add(1)
}

// NewRandomSelector returns a selector that picks a queue at random.
func NewRandomSelector() QueueSelector {
	return QueueSelectorFunc(func(_ *Message, queues []MessageQueue, _ any) MessageQueue {
		return queues[rand.IntN(len(queues))]
	})
}

// NewHashSelector returns a selector that sends every message with the
// same key to the same queue, in this process and in any other with the
// same route: the key is arg when it is a non-empty string, else the
// message's sharding key (Message.WithShardingKey), else its keys
// (Message.WithKeys); its 32-bit FNV-1a hash modulo the queue count is the
// queue's index. Messages without a key are spread round robin.
func NewHashSelector() QueueSelector { return &hashSelector{} }

type hashSelector struct {
	fallback roundRobin
}

func (h *hashSelector) Select(msg *Message, queues []MessageQueue, arg any) MessageQueue {
	key, _ := arg.(string)
	if key == "" {
		key = msg.Property(message.PropertyShardingKey)
	}
	if key == "" {
		key = msg.Property(message.PropertyKeys)
	}
	if key == "" {
		return h.fallback.Select(msg, queues, nil)
	}
	return queues[hashKey(key)%uint32(len(queues))]
}

// hashKey is the 32-bit FNV-1a hash of key.
func hashKey(key string) uint32 {
	f := fnv.New32a()
	_, _ = f.Write([]byte(key))
	return f.Sum32()
}
