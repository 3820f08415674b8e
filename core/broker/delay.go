package broker

import (
	"github.com/rmq-go/rmq/core/message"
)

// toSchedule parks a delayed or timed message until it is due.
func (b *Broker) toSchedule(m *message.Message) (int16, error) {
	return 0, nil
}
