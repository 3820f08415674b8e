package broker

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
)

func offsetResponse(req *remoting.Command, off int64) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{"offset": strconv.FormatInt(off, 10)}
	return resp
}

func queueArgs(req *remoting.Command) (string, int32, error) {
	topic := req.Get("topic")
	qid, err := req.Int32("queueId")
	if err == nil && topic == "" {
		err = errors.New("topic is required")
	}
	return topic, qid, err
}

func (b *Broker) handleQueryOffset(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, qid, err := queueArgs(req)
	group := req.Get("consumerGroup")
	if err != nil || group == "" {
		return response(req, remoting.SystemError, "query consumer offset: consumerGroup, topic and queueId are required")
	}
	if err := checkGroup(group); err != nil {
		return response(req, remoting.SubscriptionGroupNotExist, "query consumer offset: %v", err)
	}
	if off, ok := b.store.ConsumerOffset(group, topic, qid); ok {
		return offsetResponse(req, off)
	}
	// Nothing committed: a queue that never lost a message to retention
	// starts at 0, as a young RocketMQ broker answers; otherwise the client
	// decides from its consume-from-where setting.
	if b.store.MinOffset(topic, qid) == 0 {
		return offsetResponse(req, 0)
	}
	return response(req, remoting.QueryNotFound, "no committed offset for group %s on %s/%d", group, topic, qid)
}

func (b *Broker) handleUpdateOffset(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, qid, err := queueArgs(req)
	group := req.Get("consumerGroup")
	off, oerr := req.Int64("commitOffset")
	if err != nil || oerr != nil || group == "" {
		return response(req, remoting.SystemError, "update consumer offset: consumerGroup, topic, queueId and commitOffset are required")
	}
	// A client that waits for the answer is told of the commit once it
	// is durable (on a replicated set, committed by the set); a oneway
	// commit, like one carried by a pull, does not hold the connection.
	how := commitSync
	if req.IsOneway() {
		how = commitAsync
	}
	if code, err := b.commitOffset(group, topic, qid, off, how); err != nil {
		if errors.Is(err, store.ErrNotLeader) {
			return b.notMaster(req, "update consumer offset", err)
		}
		return response(req, code, "update consumer offset: %v", err)
	}
	return remoting.NewResponse(req, remoting.Success, "")
}

// commitMode is how commitOffset stores an offset.
type commitMode int

const (
	commitAsync   commitMode = iota // store.CommitOffset: a oneway commit
	commitSync                      // store.CommitOffsetSync: the client waits
	commitAdvance                   // store.AdvanceOffset: a pull's commit, forward only
)

// commitOffset stores a consumer group's offset for a queue after checking
// it: a valid group name (configured, with Options.DisableAutoCreateGroup),
// a topic that exists, one of its queues, and an offset within [0, the
// queue's max offset]. Offsets persist and are loaded at every start, so
// anything else a client sends would be kept for good.
func (b *Broker) commitOffset(group, topic string, qid int32, off int64, how commitMode) (int16, error) {
	if err := checkGroup(group); err != nil {
		return remoting.SubscriptionGroupNotExist, err
	}
	if err := b.checkConfigured(group); err != nil {
		return remoting.SubscriptionGroupNotExist, err
	}
	tc, ok := b.topics.get(topic)
	if !ok {
		return remoting.TopicNotExist, fmt.Errorf("topic %s does not exist", logName(topic))
	}
	if qid < 0 || int(qid) >= max(tc.ReadQueueNums, tc.WriteQueueNums) {
		return remoting.SystemError, fmt.Errorf("queue %d does not exist in topic %s (%d queues)", qid, topic, max(tc.ReadQueueNums, tc.WriteQueueNums))
	}
	if maxOff := b.store.MaxOffset(topic, qid); off < 0 || off > maxOff {
		return remoting.SystemError, fmt.Errorf("offset %d is outside the queue's 0..%d", off, maxOff)
	}
	commit := b.store.CommitOffset
	switch how {
	case commitSync:
		commit = b.store.CommitOffsetSync
	case commitAdvance:
		commit = b.store.AdvanceOffset
	}
	if err := commit(group, topic, qid, off); err != nil {
		if errors.Is(err, store.ErrNotLeader) {
			return remoting.ServiceNotAvailable, err
		}
		return remoting.SystemError, err
	}
	return remoting.Success, nil
}

// The Go client reads `offset` from these answers without checking the
// code, so every answer carries it.

func (b *Broker) handleMaxOffset(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	return b.queueOffsetAnswer(req, "get max offset", b.store.MaxOffset)
}

func (b *Broker) handleMinOffset(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	return b.queueOffsetAnswer(req, "get min offset", b.store.MinOffset)
}

// queueOffsetAnswer answers a request for one of a queue's offsets.
func (b *Broker) queueOffsetAnswer(req *remoting.Command, what string, get func(string, int32) int64) *remoting.Command {
	topic, qid, err := queueArgs(req)
	if err != nil {
		resp := offsetResponse(req, 0)
		resp.Code, resp.Remark = remoting.SystemError, what+": "+err.Error()
		return resp
	}
	return offsetResponse(req, get(topic, qid))
}

func (b *Broker) handleSearchOffset(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, qid, err := queueArgs(req)
	ts, terr := req.Int64("timestamp")
	if err != nil || terr != nil {
		resp := offsetResponse(req, 0)
		resp.Code, resp.Remark = remoting.SystemError, "search offset: topic, queueId and timestamp are required"
		return resp
	}
	off, err := b.store.OffsetForTimestamp(topic, qid, ts)
	if err != nil {
		b.log.Warn("search offset by timestamp", "topic", topic, "queue", qid, "err", err)
		off = b.store.MaxOffset(topic, qid)
	}
	return offsetResponse(req, off)
}

func (b *Broker) handleEarliestStoreTime(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, qid, err := queueArgs(req)
	if err != nil {
		return response(req, remoting.SystemError, "get earliest store time: %v", err)
	}
	minOff, maxOff := b.store.QueueOffsets(topic, qid)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.ExtFields = map[string]string{"timestamp": "0"}
	if minOff < maxOff {
		if r, err := b.readOne(topic, qid, minOff); err == nil {
			resp.ExtFields["timestamp"] = strconv.FormatInt(r.StoreTimestamp(), 10)
		}
	}
	return resp
}
