package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
)

// Read-only statistics for operators: GET_CONSUME_STATS (a group's lag),
// GET_TOPIC_STATS_INFO (a topic's queue offsets), GET_ALL_TOPIC_CONFIG
// (the topic table) and GET_BROKER_RUNTIME_INFO (the broker's figures).
//
// Both bodies are maps keyed by a MessageQueue object. RocketMQ encodes
// them with fastjson, which writes an object key as the object itself, so
// the body is not strict JSON; the Java tools (mqadmin consumerProgress,
// topicStatus) and the Go client's fastjson parser read exactly that form:
//
//	{"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"brokerOffset":9,"consumerOffset":4,"lastTimestamp":1700000000000},…}}
//
// Keys and fields are in fastjson's order (alphabetical). Every body is
// bounded by the tables it walks: a topic's read queues (maxQueueNums) and
// the topics a group has offsets on, which exist only for topics the
// broker holds (maxTopics).

// statsQueue is a MessageQueue as fastjson writes it in a map key.
type statsQueue struct {
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
	Topic      string `json:"topic"`
}

// offsetWrapper is one queue's row of ConsumeStats.
type offsetWrapper struct {
	BrokerOffset   int64 `json:"brokerOffset"`   // the queue's max offset
	ConsumerOffset int64 `json:"consumerOffset"` // the group's committed offset, 0 when none
	LastTimestamp  int64 `json:"lastTimestamp"`  // store time (ms) of the last consumed message, 0 when none
}

// topicOffset is one queue's row of TopicStatsTable.
type topicOffset struct {
	LastUpdateTimestamp int64 `json:"lastUpdateTimestamp"` // store time (ms) of the newest message, 0 when empty
	MaxOffset           int64 `json:"maxOffset"`
	MinOffset           int64 `json:"minOffset"`
}

// queueKeyed writes {key:value,…} with object keys, fastjson's form of a
// map keyed by MessageQueue.
type queueKeyed struct {
	buf bytes.Buffer
	n   int
}

func (q *queueKeyed) add(k statsQueue, v any) {
	if q.n == 0 {
		q.buf.WriteByte('{')
	} else {
		q.buf.WriteByte(',')
	}
	q.n++
	kb, _ := json.Marshal(k)
	vb, _ := json.Marshal(v)
	q.buf.Write(kb)
	q.buf.WriteByte(':')
	q.buf.Write(vb)
}

func (q *queueKeyed) bytes() []byte {
	if q.n == 0 {
		return []byte("{}")
	}
	q.buf.WriteByte('}')
	return q.buf.Bytes()
}

// storeTimeAt is the store time of the message at off, 0 when it cannot
// be read (retention, a hole).
func (b *Broker) storeTimeAt(topic string, qid int32, off int64) int64 {
	if off < 0 {
		return 0
	}
	r, err := b.readOne(topic, qid, off)
	if err != nil {
		return 0
	}
	return r.StoreTimestamp()
}

// handleConsumeStats answers GET_CONSUME_STATS: for each read queue of the
// topic (or of every existing topic the group has offsets on), the queue's
// max offset, the group's committed offset and the store time of the
// last consumed message. Lag is brokerOffset − consumerOffset.
func (b *Broker) handleConsumeStats(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	group, topic := req.Get("consumerGroup"), req.Get("topic")
	if err := checkGroup(group); err != nil {
		return response(req, remoting.SystemError, "get consume stats: %v", err)
	}
	var topics []string
	if topic != "" {
		if _, ok := b.topics.get(topic); !ok {
			return response(req, remoting.TopicNotExist, "get consume stats: topic %s does not exist", logName(topic))
		}
		topics = []string{topic}
	} else {
		seen := map[string]bool{}
		for _, e := range b.store.ConsumerOffsets(group) {
			if !seen[e.Topic] {
				seen[e.Topic] = true
				topics = append(topics, e.Topic)
			}
		}
		slices.Sort(topics)
	}
	var table queueKeyed
	for _, t := range topics {
		tc, ok := b.topics.get(t)
		if !ok {
			continue // deleted since the offset was committed
		}
		for qid := int32(0); qid < int32(tc.ReadQueueNums); qid++ {
			w := offsetWrapper{BrokerOffset: max(0, b.store.MaxOffset(t, qid))}
			if off, ok := b.store.ConsumerOffset(group, t, qid); ok && off > 0 {
				w.ConsumerOffset = off
				w.LastTimestamp = b.storeTimeAt(t, qid, off-1)
			}
			table.add(statsQueue{BrokerName: b.opts.BrokerName, QueueID: qid, Topic: t}, w)
		}
	}
	var body bytes.Buffer
	body.WriteString(`{"consumeTps":0.0,"offsetTable":`)
	body.Write(table.bytes())
	body.WriteByte('}')
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body.Bytes()
	return resp
}

// handleTopicStats answers GET_TOPIC_STATS_INFO: each read queue's min and
// max offsets and the store time of its newest message.
func (b *Broker) handleTopicStats(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic := req.Get("topic")
	tc, ok := b.topics.get(topic)
	if !ok {
		return response(req, remoting.TopicNotExist, "get topic stats: topic %s does not exist", logName(topic))
	}
	var table queueKeyed
	for qid := int32(0); qid < int32(tc.ReadQueueNums); qid++ {
		minOff, maxOff := b.store.QueueOffsets(topic, qid)
		o := topicOffset{MinOffset: max(0, minOff), MaxOffset: max(0, maxOff)}
		if maxOff > minOff {
			o.LastUpdateTimestamp = b.storeTimeAt(topic, qid, maxOff-1)
		}
		table.add(statsQueue{BrokerName: b.opts.BrokerName, QueueID: qid, Topic: topic}, o)
	}
	var body bytes.Buffer
	body.WriteString(`{"offsetTable":`)
	body.Write(table.bytes())
	body.WriteByte('}')
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body.Bytes()
	return resp
}

// handleAllTopics answers GET_ALL_TOPIC_CONFIG with the topic table and
// its version, as registrations carry it; the table is bounded by
// maxTopics.
func (b *Broker) handleAllTopics(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	topics, version := b.topics.snapshot()
	body, _ := json.Marshal(remoting.TopicConfigWrapper{TopicConfigTable: topics, DataVersion: version})
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// versionDesc is the RocketMQ version this broker answers as, by the name
// of remoting.DefaultVersion's ordinal.
const versionDesc = "V4_9_8"

// runtimeInfo is GET_BROKER_RUNTIME_INFO's table: a subset of RocketMQ's
// keys (mqadmin brokerStatus prints them all), each from this broker's
// own figures. msgPutTotalTodayNow counts the records stored since the
// broker started, not since midnight. connectionCount, the connections
// the broker serves (clients, tools, this request's), is this broker's
// own key.
func (b *Broker) runtimeInfo() map[string]string {
	up := b.now().Sub(b.boot).Truncate(time.Second)
	minOff, maxOff := b.store.CommitLogOffsets()
	i := strconv.FormatInt
	return map[string]string{
		"brokerVersionDesc":   versionDesc,
		"brokerVersion":       i(int64(remoting.DefaultVersion), 10),
		"bootTimestamp":       i(b.boot.UnixMilli(), 10),
		"runtime":             fmt.Sprintf("[ %d days, %d hours, %d minutes, %d seconds ]", int(up.Hours())/24, int(up.Hours())%24, int(up.Minutes())%60, int(up.Seconds())%60),
		"msgPutTotalTodayNow": i(b.store.Stats().Appends.Load(), 10),
		"commitLogMinOffset":  i(minOff, 10),
		"commitLogMaxOffset":  i(maxOff, 10),
		"connectionCount":     i(int64(b.rs.Conns()), 10),
	}
}

func (b *Broker) handleRuntimeInfo(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	body, _ := json.Marshal(remoting.KVTable{Table: b.runtimeInfo()})
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}
