package message

import (
	"slices"
	"strings"

	"github.com/rmq-go/rmq/internal/properties"
)

// Property keys with a meaning to the broker or the clients.
const (
	PropertyTags                  = "TAGS"
	PropertyKeys                  = "KEYS"
	PropertyUniqKey               = "UNIQ_KEY"
	PropertyDelayLevel            = "DELAY"
	PropertyTimerDeliverMS        = "TIMER_DELIVER_MS"
	PropertyTimerDelaySec         = "TIMER_DELAY_SEC"
	PropertyTimerDelayMS          = "TIMER_DELAY_MS"
	PropertyTimerOutMS            = "TIMER_OUT_MS"
	PropertyWaitStoreOK           = "WAIT"
	PropertyTransactionPrepared   = "TRAN_MSG"
	PropertyProducerGroup         = "PGROUP"
	PropertyRealTopic             = "REAL_TOPIC"
	PropertyRealQueueID           = "REAL_QID"
	PropertyRetryTopic            = "RETRY_TOPIC"
	PropertyOriginMessageID       = "ORIGIN_MESSAGE_ID"
	PropertyMaxReconsumeTimes     = "MAX_RECONSUME_TIMES"
	PropertyReconsumeTime         = "RECONSUME_TIME"
	PropertyCheckImmunityTime     = "CHECK_IMMUNITY_TIME_IN_SECONDS"
	PropertyTransactionCheckTimes = "TRANSACTION_CHECK_TIMES"
	PropertyTransactionID         = "__transactionId__"
	PropertyCluster               = "CLUSTER"
	PropertyShardingKey           = "__SHARDINGKEY"
	// PropertyShardingKeyOld is where this broker kept a FIFO message
	// group before it used RocketMQ's name; such stored messages are still
	// delivered in their group.
	PropertyShardingKeyOld = "SHARDING_KEY"
	PropertyMinOffset      = "MIN_OFFSET"
	PropertyMaxOffset      = "MAX_OFFSET"
	PropertyCorrelationID  = "CORRELATION_ID"
	PropertyReplyToClient  = "REPLY_TO_CLIENT"
	PropertyMessageType    = "MSG_TYPE"
	PropertyPushReplyTime  = "PUSH_REPLY_TIME"
	// PropertyPriority is a priority message's priority, 0 or more: the
	// queue it goes to (RocketMQ 5.4's name).
	PropertyPriority = "_SYS_MSG_PRIORITY_"
	// PropertyTraceContext is a RocketMQ 5 message's trace context
	// (SystemProperties.trace_context), PropertyBornHost the born host its
	// client named (born_host): where RocketMQ's proxy keeps them.
	PropertyTraceContext = "TRACE_CONTEXT"
	PropertyBornHost     = "__BORNHOST"
)

// MaxPropertiesLen is the longest properties string the stored layout can
// hold: its length field is an int16.
const MaxPropertiesLen = properties.MaxLen

// Properties is an encoded properties string (key 0x01 value 0x02 ...). It
// is used as stored, so reading a property costs a scan and no allocation.
// The codec itself is internal/properties, shared with the sdk.
type Properties []byte

// Lookup returns the value of key without allocating. The returned slice
// aliases p. A key that appears twice yields its last value, as a client
// decoding into a map would see it.
func (p Properties) Lookup(key string) ([]byte, bool) { return properties.Lookup(p, key) }

// Get returns the value of key as a string, or "" if it is absent.
func (p Properties) Get(key string) string {
	v, _ := p.Lookup(key)
	return string(v)
}

// Has reports whether key is present.
func (p Properties) Has(key string) bool {
	_, ok := p.Lookup(key)
	return ok
}

// Each calls fn for each well-formed pair in order until fn returns false.
// The slices alias p.
func (p Properties) Each(fn func(key, value []byte) bool) {
	for rest := []byte(p); len(rest) > 0; {
		var k, v []byte
		var ok bool
		k, v, rest, ok = properties.Next(rest)
		if ok && !fn(k, v) {
			return
		}
	}
}

// Map decodes p into a new map.
func (p Properties) Map() map[string]string {
	m := make(map[string]string, 8)
	p.Each(func(k, v []byte) bool {
		m[string(k)] = string(v)
		return true
	})
	return m
}

// With returns a copy of p where key has value (added or replaced). The
// receiver is not modified.
func (p Properties) With(key, value string) Properties {
	out := make(Properties, 0, len(p)+len(key)+len(value)+2)
	p.Each(func(k, v []byte) bool {
		if string(k) != key {
			out = appendPair(out, k, v)
		}
		return true
	})
	return appendPair(out, []byte(key), []byte(value))
}

// Without returns a copy of p with the given keys removed.
func (p Properties) Without(keys ...string) Properties {
	out := make(Properties, 0, len(p))
	p.Each(func(k, v []byte) bool {
		if !slices.Contains(keys, string(k)) {
			out = appendPair(out, k, v)
		}
		return true
	})
	return out
}

// EncodeProperties encodes m with its keys sorted, so the same map always
// encodes to the same bytes. Pairs with an empty key or value are skipped (a
// client never sends them), and so are keys or values holding a separator
// byte, which could not be read back.
func EncodeProperties(m map[string]string) Properties { return properties.Encode(m) }

func appendPair(dst Properties, k, v []byte) Properties { return properties.AppendPair(dst, k, v) }

// AppendProperty appends the pair key, value to dst like append, so a
// caller that sized dst leaves it allocation-free. A dst that does not end
// with a value separator (a client may leave the last one off) gets one
// first, so every pair already in dst reads as before. It does not check
// for key already being present: Lookup then yields the appended value.
func AppendProperty(dst Properties, key, value string) Properties {
	if len(dst) > 0 && dst[len(dst)-1] != properties.ValueSep {
		dst = append(dst, properties.ValueSep)
	}
	dst = append(dst, key...)
	dst = append(dst, properties.NameSep)
	dst = append(dst, value...)
	return append(dst, properties.ValueSep)
}

// Tags returns the TAGS property, or "".
func (p Properties) Tags() string { return p.Get(PropertyTags) }

// Keys returns the space-separated KEYS property split into keys.
func (p Properties) Keys() []string {
	v, ok := p.Lookup(PropertyKeys)
	if !ok {
		return nil
	}
	return strings.Fields(string(v))
}
