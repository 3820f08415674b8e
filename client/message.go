package client

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/rmq-go/rmq/core/message"
)

// Message is a message to send. Properties holds user properties and the
// system ones this package sets (TAGS, KEYS, DELAY, ...); the helpers below
// set the common ones.
type Message struct {
	Topic      string
	Body       []byte
	Flag       int32
	Properties map[string]string
}

// NewMessage returns a message for topic with body.
func NewMessage(topic string, body []byte) *Message {
	return &Message{Topic: topic, Body: body}
}

// Property returns the value of a property, or "".
func (m *Message) Property(key string) string { return m.Properties[key] }

// SetProperty sets a property and returns m.
func (m *Message) SetProperty(key, value string) *Message {
	if m.Properties == nil {
		m.Properties = make(map[string]string)
	}
	m.Properties[key] = value
	return m
}

// WithTag sets the message's tag (TAGS) and returns m.
func (m *Message) WithTag(tag string) *Message { return m.SetProperty(message.PropertyTags, tag) }

// Tag returns the message's tag.
func (m *Message) Tag() string { return m.Properties[message.PropertyTags] }

// WithKeys sets the message's keys (KEYS, space separated) and returns m.
func (m *Message) WithKeys(keys ...string) *Message {
	return m.SetProperty(message.PropertyKeys, strings.Join(keys, " "))
}

// Keys returns the message's keys.
func (m *Message) Keys() []string { return strings.Fields(m.Properties[message.PropertyKeys]) }

// WithDelayLevel asks the broker to deliver the message after delay level
// level (1-18 by default) and returns m.
func (m *Message) WithDelayLevel(level int) *Message {
	return m.SetProperty(message.PropertyDelayLevel, strconv.Itoa(level))
}

// WithShardingKey sets the key that HashSelector and orderly producers
// pick a queue by, and returns m.
func (m *Message) WithShardingKey(key string) *Message {
	return m.SetProperty(message.PropertyShardingKey, key)
}

// WithPriority makes m a priority message of priority p, 0 the lowest,
// and returns m. Sent to a PRIORITY topic, it is stored in the queue of its
// priority (the last queue for a priority beyond it) whatever queue the
// producer picks, and RocketMQ 5 consumers receive the highest priorities
// first. A delayed, transactional or sharded message loses its priority.
// p below 0 panics, as it is a mistake of the caller's.
func (m *Message) WithPriority(p int) *Message {
	if p < 0 {
		panic(fmt.Sprintf("client: priority %d is below 0", p))
	}
	return m.SetProperty(message.PropertyPriority, strconv.Itoa(p))
}

// MessageQueue names one queue of a topic on one broker.
type MessageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

func (q MessageQueue) String() string {
	return q.Topic + "@" + q.BrokerName + ":" + strconv.Itoa(int(q.QueueID))
}

// less orders queues by topic, broker name and queue id.
func (q MessageQueue) less(o MessageQueue) bool {
	if q.Topic != o.Topic {
		return q.Topic < o.Topic
	}
	if q.BrokerName != o.BrokerName {
		return q.BrokerName < o.BrokerName
	}
	return q.QueueID < o.QueueID
}

// MessageExt is a message as a consumer receives it.
type MessageExt struct {
	Message
	// MsgID is the message's unique id (UNIQ_KEY) when it has one, else
	// its OffsetMsgID.
	MsgID string
	// OffsetMsgID encodes the storing broker's address and the message's
	// commit-log offset.
	OffsetMsgID               string
	BrokerName                string
	QueueID                   int32
	QueueOffset               int64
	CommitLogOffset           int64
	SysFlag                   int32
	BodyCRC                   uint32
	BornTimestamp             int64
	BornHost                  string
	StoreTimestamp            int64
	StoreHost                 string
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
}

// Queue returns the queue the message was read from.
func (m *MessageExt) Queue() MessageQueue {
	return MessageQueue{Topic: m.Topic, BrokerName: m.BrokerName, QueueID: m.QueueID}
}

func (m *MessageExt) String() string {
	return fmt.Sprintf("%s %s offset %d reconsume %d", m.MsgID, m.Queue(), m.QueueOffset, m.ReconsumeTimes)
}

// maxDecompressed bounds a decompressed body, so a hostile or corrupt body
// cannot exhaust memory.
const maxDecompressed = 64 << 20

// decodeMessages turns a pull response body into messages of broker
// brokerName. Compressed bodies are inflated; a body that fails to inflate
// is kept as received and reported in the returned error, which does not
// stop the other messages.
func decodeMessages(body []byte, brokerName string) ([]*MessageExt, error) {
	recs, err := message.DecodeRecords(body)
	if err != nil {
		return nil, err
	}
	out := make([]*MessageExt, 0, len(recs))
	var bad error
	for _, r := range recs {
		m, err := fromRecord(r, brokerName)
		if err != nil && bad == nil {
			bad = err
		}
		out = append(out, m)
	}
	return out, bad
}

// fromRecord copies a stored record into a MessageExt.
func fromRecord(r message.Record, brokerName string) (*MessageExt, error) {
	var dm message.Message
	r.Decode(&dm)
	m := &MessageExt{
		Message: Message{
			Topic:      dm.Topic,
			Flag:       dm.Flag,
			Properties: dm.Properties.Map(),
		},
		BrokerName:                brokerName,
		QueueID:                   dm.QueueID,
		QueueOffset:               dm.QueueOffset,
		CommitLogOffset:           dm.CommitLogOffset,
		SysFlag:                   dm.SysFlag,
		BodyCRC:                   dm.BodyCRC,
		BornTimestamp:             dm.BornTimestamp,
		BornHost:                  dm.BornHost.String(),
		StoreTimestamp:            dm.StoreTimestamp,
		StoreHost:                 dm.StoreHost.String(),
		ReconsumeTimes:            dm.ReconsumeTimes,
		PreparedTransactionOffset: dm.PreparedTransactionOffset,
	}
	m.OffsetMsgID = message.OffsetMsgID(dm.StoreHost, dm.CommitLogOffset)
	m.MsgID = m.Properties[message.PropertyUniqKey]
	if m.MsgID == "" {
		m.MsgID = m.OffsetMsgID
	}
	var err error
	if dm.SysFlag&message.SysFlagCompressed != 0 {
		body, zerr := inflate(dm.SysFlag, dm.Body)
		if zerr != nil {
			err = fmt.Errorf("client: message %s: %w", m.MsgID, zerr)
			body = append([]byte(nil), dm.Body...)
		} else {
			m.SysFlag &^= message.SysFlagCompressed | message.SysFlagCompressionMask
		}
		m.Body = body
	} else {
		m.Body = append([]byte(nil), dm.Body...)
	}
	return m, err
}

// deflate compresses body with zlib at the given level.
func deflate(body []byte, level int) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(len(body) / 2)
	w, err := zlib.NewWriterLevel(&buf, level)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(body); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// inflate decompresses a zlib body, refusing more than maxDecompressed
// bytes of output. A Java producer may be told to compress with zstd or
// LZ4 instead (the compression type in sysFlag): this client, on the
// standard library alone, says so and delivers the body as stored.
func inflate(sysFlag int32, body []byte) ([]byte, error) {
	if t := sysFlag & message.SysFlagCompressionMask; t != 0 && t != message.SysFlagCompressionZlib {
		return nil, fmt.Errorf("inflate: compression type %d (zstd 2, LZ4 1) is not read by this client", t>>8)
	}
	r, err := zlib.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("inflate: %w", err)
	}
	defer r.Close()
	out, err := io.ReadAll(io.LimitReader(r, maxDecompressed+1))
	if err != nil {
		return nil, fmt.Errorf("inflate: %w", err)
	}
	if len(out) > maxDecompressed {
		return nil, fmt.Errorf("inflate: body larger than %d bytes", maxDecompressed)
	}
	return out, nil
}
