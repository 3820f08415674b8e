package broker

import (
	"github.com/rmq-go/rmq/core/message"
)

// retryFilter filters a group's retry topic: each retried message is
// checked against the group's current subscription to the topic it first
// went to (its RETRY_TOPIC), so a consumer that re-subscribed with a
// narrower expression is not handed retries it no longer wants. A message
// whose original topic the group no longer subscribes to is delivered,
// since only the group's own client can still act on it.
type retryFilter struct {
	// subscription looks up a group's current subscription to a topic
	// (the client table).
	subscription func(group, topic string) (*subscription, bool)
	group        string
	inner        Filter // the retry topic's own subscription ("*")
}

func (f *retryFilter) MatchTagHash(hash int64) bool { return f.inner.MatchTagHash(hash) }

func (f *retryFilter) NeedsRecord() bool { return true }

func (f *retryFilter) Match(batch []message.Record, out []bool) error {
	if err := f.inner.Match(batch, out); err != nil && f.inner.NeedsRecord() {
		return err
	}
	for i, r := range batch {
		if f.inner.NeedsRecord() && !out[i] {
			continue
		}
		out[i] = true
		topic, ok := r.Properties().Lookup(message.PropertyRetryTopic)
		if !ok {
			continue
		}
		sub, ok := f.subscription(f.group, string(topic))
		if !ok || sub.err != nil {
			continue
		}
		tags, _ := r.Properties().Lookup(message.PropertyTags)
		if !sub.filter.MatchTagHash(message.TagHashBytes(tags)) {
			out[i] = false
			continue
		}
		if sub.filter.NeedsRecord() {
			res := []bool{false}
			if err := sub.filter.Match(batch[i:i+1], res); err != nil {
				return err
			}
			out[i] = res[0]
		}
	}
	return nil
}
