package broker

import (
	"errors"

	"github.com/rmq-go/rmq/core/message"
)

// toHalf stores a half message invisibly until its producer commits or
// rolls it back.
func (b *Broker) toHalf(m *message.Message) error {
	return errors.New("transactional messages are not supported yet")
}
