package broker

import (
	"strconv"
	"strings"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// priorityQueue returns the queue of a priority message: its priority
// (message.PropertyPriority), capped at the topic's last writable queue.
// As in RocketMQ the message decides, not its topic's type, and the queue
// the producer picked is overridden. A message of another kind (a
// transaction's, a delayed or timed one, a FIFO group's) goes where its
// kind sends it and loses the property, as RocketMQ drops it; a value that
// is not a number of 0 or more is no priority (RocketMQ reads it as -1)
// and is left alone. Batches keep the queue of their header.
func priorityQueue(h *remoting.SendHeader, tc TopicConfig) (int32, bool) {
	if h.Batch || !strings.Contains(h.Properties, message.PropertyPriority) {
		return 0, false
	}
	props := message.Properties(h.Properties)
	v, ok := props.Lookup(message.PropertyPriority)
	if !ok {
		return 0, false
	}
	p, err := strconv.Atoi(string(v))
	if err != nil || p < 0 {
		return 0, false
	}
	if h.SysFlag&message.SysFlagTxPrepared != 0 || props.Get(message.PropertyTransactionPrepared) == "true" ||
		props.Has(message.PropertyDelayLevel) || props.Has(message.PropertyTimerDeliverMS) ||
		props.Has(message.PropertyTimerDelaySec) || props.Has(message.PropertyTimerDelayMS) ||
		props.Has(message.PropertyShardingKey) {
		h.Properties = string(props.Without(message.PropertyPriority))
		return 0, false
	}
	return int32(min(p, int(writableQueues(tc))-1)), true
}
