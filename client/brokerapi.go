package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/rmq-go/rmq/core/allocate"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// The requests consumers make of brokers, one function each. Each finds
// the broker's address by name, refreshing the topic's route once when
// the broker is not known yet.

// Pull flag bits of PULL_MESSAGE's sysFlag.
const (
	pullFlagCommitOffset = 1 << 0
	pullFlagSuspend      = 1 << 1
	pullFlagSubscription = 1 << 2
)

// pullRequest is one PULL_MESSAGE.
type pullRequest struct {
	group          string
	queue          MessageQueue
	offset         int64
	maxNums        int32
	sysFlag        int32
	commitOffset   int64
	suspend        int64 // ms the broker may hold the pull
	expression     string
	expressionType string
}

// pullStatus is a pull's outcome.
type pullStatus int

const (
	pullFound pullStatus = iota
	pullNoNewMsg
	pullNoMatchedMsg
	pullOffsetIllegal
)

// pullResult is a PULL_MESSAGE answer.
type pullResult struct {
	status          pullStatus
	nextBeginOffset int64
	minOffset       int64
	maxOffset       int64
	msgs            []*MessageExt
}

// pull sends one PULL_MESSAGE and waits up to the hold time plus the
// request timeout.
func (in *instance) pull(ctx context.Context, r pullRequest) (*pullResult, error) {
	addr, err := in.brokerAddrFor(ctx, r.queue.BrokerName, r.queue.Topic)
	if err != nil {
		return nil, err
	}
	ext := map[string]string{
		"consumerGroup":        r.group,
		"topic":                r.queue.Topic,
		"queueId":              strconv.Itoa(int(r.queue.QueueID)),
		"queueOffset":          itoa64(r.offset),
		"maxMsgNums":           strconv.Itoa(int(r.maxNums)),
		"sysFlag":              strconv.Itoa(int(r.sysFlag)),
		"commitOffset":         itoa64(r.commitOffset),
		"suspendTimeoutMillis": itoa64(r.suspend),
		"subscription":         r.expression,
		"subVersion":           "0",
		"expressionType":       r.expressionType,
	}
	ctx, cancel := context.WithTimeout(ctx, in.opts.RequestTimeout+msDuration(r.suspend))
	defer cancel()
	resp, err := in.rc.Invoke(ctx, addr, remoting.NewRequest(remoting.PullMessage, ext, nil))
	if err != nil {
		return nil, err
	}
	// The messages are copied out of the body (fromRecord).
	defer resp.Recycle()
	res := &pullResult{}
	switch resp.Code {
	case remoting.Success:
		res.status = pullFound
	case remoting.PullNotFound:
		res.status = pullNoNewMsg
	case remoting.PullRetryImmediately:
		res.status = pullNoMatchedMsg
	case remoting.PullOffsetMoved:
		res.status = pullOffsetIllegal
	default:
		return nil, brokerError(resp)
	}
	if res.nextBeginOffset, err = resp.Int64("nextBeginOffset"); err != nil {
		return nil, fmt.Errorf("pull answer from %s: %w", addr, err)
	}
	res.minOffset, _ = resp.Int64Or("minOffset", 0)
	res.maxOffset, _ = resp.Int64Or("maxOffset", 0)
	if res.status == pullFound {
		msgs, derr := decodeMessages(resp.Body, r.queue.BrokerName)
		if derr != nil && msgs == nil {
			return nil, fmt.Errorf("pull answer from %s: %w", addr, derr)
		}
		if derr != nil {
			in.log.Warn("pulled a message whose body could not be inflated; delivering it as stored", "queue", r.queue, "err", derr)
		}
		res.msgs = msgs
	}
	return res, nil
}

// queryConsumerOffset returns the group's committed offset of q, or
// errOffsetNotFound.
func (in *instance) queryConsumerOffset(ctx context.Context, group string, q MessageQueue) (int64, error) {
	resp, err := in.queueRequest(ctx, q, remoting.QueryConsumerOffset, map[string]string{"consumerGroup": group})
	if err != nil {
		return 0, err
	}
	switch resp.Code {
	case remoting.Success:
		return resp.Int64("offset")
	case remoting.QueryNotFound:
		return 0, errOffsetNotFound
	}
	return 0, brokerError(resp)
}

// updateConsumerOffset commits the group's offset of q and waits for the
// broker's answer.
func (in *instance) updateConsumerOffset(ctx context.Context, group string, q MessageQueue, offset int64) error {
	resp, err := in.queueRequest(ctx, q, remoting.UpdateConsumerOffset, map[string]string{"consumerGroup": group, "commitOffset": itoa64(offset)})
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		return brokerError(resp)
	}
	return nil
}

// maxOffset returns the offset the next message of q will get.
func (in *instance) maxOffset(ctx context.Context, q MessageQueue) (int64, error) {
	return in.offsetRequest(ctx, q, remoting.GetMaxOffset, nil)
}

// minOffset returns the smallest offset still stored in q.
func (in *instance) minOffset(ctx context.Context, q MessageQueue) (int64, error) {
	return in.offsetRequest(ctx, q, remoting.GetMinOffset, nil)
}

// searchOffset returns the offset of the first message of q stored at or
// after ts.
func (in *instance) searchOffset(ctx context.Context, q MessageQueue, ts int64) (int64, error) {
	return in.offsetRequest(ctx, q, remoting.SearchOffsetByTimestamp, map[string]string{"timestamp": itoa64(ts)})
}

func (in *instance) offsetRequest(ctx context.Context, q MessageQueue, code int16, ext map[string]string) (int64, error) {
	if ext == nil {
		ext = map[string]string{}
	}
	resp, err := in.queueRequest(ctx, q, code, ext)
	if err != nil {
		return 0, err
	}
	if resp.Code != remoting.Success {
		return 0, brokerError(resp)
	}
	return resp.Int64("offset")
}

// queueRequest sends a request about one queue to its broker.
func (in *instance) queueRequest(ctx context.Context, q MessageQueue, code int16, ext map[string]string) (*remoting.Command, error) {
	addr, err := in.brokerAddrFor(ctx, q.BrokerName, q.Topic)
	if err != nil {
		return nil, err
	}
	ext["topic"] = q.Topic
	ext["queueId"] = strconv.Itoa(int(q.QueueID))
	return in.invoke(ctx, addr, remoting.NewRequest(code, ext, nil))
}

// consumerIDs returns the live members of group as a broker of topic
// knows them.
func (in *instance) consumerIDs(ctx context.Context, group, topic string) ([]string, error) {
	r, err := in.route(ctx, topic)
	if err != nil {
		return nil, err
	}
	addr, err := in.anyBrokerOf(ctx, r)
	if err != nil {
		return nil, err
	}
	resp, err := in.invoke(ctx, addr, remoting.NewRequest(remoting.GetConsumerListByGroup, map[string]string{"consumerGroup": group}, nil))
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.Success {
		return nil, brokerError(resp)
	}
	var body remoting.ConsumerListBody
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		return nil, fmt.Errorf("consumer list from %s: %w", addr, err)
	}
	return body.ConsumerIDList, nil
}

// anyBrokerOf picks one broker of a route at random.
func (in *instance) anyBrokerOf(ctx context.Context, r *topicRoute) (string, error) {
	bds := r.data.BrokerDatas
	if len(bds) == 0 {
		return "", fmt.Errorf("%w: route of %s lists no broker", ErrBrokerNotFound, r.topic)
	}
	bd := bds[rand.IntN(len(bds))]
	return in.brokerAddrFor(ctx, bd.BrokerName, r.topic)
}

// lockBatch asks brokerName to lock qs for the group and returns the
// queues it locked.
func (in *instance) lockBatch(ctx context.Context, brokerName, group string, qs []MessageQueue) ([]MessageQueue, error) {
	resp, err := in.lockRequest(ctx, remoting.LockBatchMQ, brokerName, group, qs)
	if err != nil || resp == nil {
		return nil, err
	}
	var res remoting.LockBatchResult[MessageQueue]
	if err := json.Unmarshal(resp.Body, &res); err != nil {
		return nil, fmt.Errorf("lock answer from %s: %w", brokerName, err)
	}
	return res.LockOKMQSet, nil
}

// unlockBatch releases the group's locks of qs at brokerName.
func (in *instance) unlockBatch(ctx context.Context, brokerName, group string, qs []MessageQueue) error {
	_, err := in.lockRequest(ctx, remoting.UnlockBatchMQ, brokerName, group, qs)
	return err
}

// lockRequest sends LOCK_BATCH_MQ or UNLOCK_BATCH_MQ for qs; it answers
// nil, nil when there is nothing to send.
func (in *instance) lockRequest(ctx context.Context, code int16, brokerName, group string, qs []MessageQueue) (*remoting.Command, error) {
	if len(qs) == 0 {
		return nil, nil
	}
	addr, err := in.brokerAddrFor(ctx, brokerName, qs[0].Topic)
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(remoting.LockBatchBody[MessageQueue]{ConsumerGroup: group, ClientID: in.id, MQSet: qs})
	resp, err := in.invoke(ctx, addr, remoting.NewRequest(code, map[string]string{}, body))
	if err != nil {
		return nil, err
	}
	if resp.Code != remoting.Success {
		return nil, brokerError(resp)
	}
	return resp, nil
}

// sendBack asks the broker that stored msg to retry it later for group
// (delay level delayLevel; 0 lets the broker choose 3 + reconsume times)
// or, past maxReconsume, to dead-letter it.
func (in *instance) sendBack(ctx context.Context, group string, msg *MessageExt, delayLevel, maxReconsume int32) error {
	addr, err := in.brokerAddrFor(ctx, msg.BrokerName, msg.Topic)
	if err != nil {
		return err
	}
	ext := map[string]string{
		"group":             group,
		"originTopic":       msg.Topic,
		"offset":            itoa64(msg.CommitLogOffset),
		"delayLevel":        strconv.Itoa(int(delayLevel)),
		"originMsgId":       msg.MsgID,
		"maxReconsumeTimes": strconv.Itoa(int(maxReconsume)),
	}
	resp, err := in.invoke(ctx, addr, remoting.NewRequest(remoting.ConsumerSendMsgBack, ext, nil))
	if err != nil {
		return err
	}
	if resp.Code != remoting.Success {
		return brokerError(resp)
	}
	return nil
}

// errNoAssignment is returned by queryAssignment when the broker does not
// serve QUERY_ASSIGNMENT.
var errNoAssignment = errors.New("client: broker does not assign queues")

// queryAssignment asks each broker with readable queues of topic for this
// client's queues of topic under the group's strategy at the broker, and
// returns them all. A broker assigns only its own queues, among the
// consumers it knows, so every queue of the topic is assigned once.
func (in *instance) queryAssignment(ctx context.Context, group, topic, strategy, model string) ([]MessageQueue, error) {
	r, err := in.route(ctx, topic)
	if err != nil {
		return nil, err
	}
	var brokers []string
	for _, q := range r.readQueues {
		if !slices.Contains(brokers, q.BrokerName) {
			brokers = append(brokers, q.BrokerName)
		}
	}
	if len(brokers) == 0 {
		return nil, fmt.Errorf("%w: route of %s lists no readable queue", ErrBrokerNotFound, topic)
	}
	body, _ := json.Marshal(allocate.QueryAssignmentRequest{Topic: topic, ConsumerGroup: group, ClientID: in.id, StrategyName: strategy, MessageModel: model})
	var out []MessageQueue
	for _, name := range brokers {
		addr, err := in.brokerAddrFor(ctx, name, topic)
		if err != nil {
			return nil, err
		}
		resp, err := in.invoke(ctx, addr, remoting.NewRequest(remoting.QueryAssignment, map[string]string{}, body))
		if err != nil {
			return nil, err
		}
		if resp.Code == remoting.RequestCodeNotSupported {
			return nil, errNoAssignment
		}
		if resp.Code != remoting.Success {
			return nil, brokerError(resp)
		}
		var res allocate.QueryAssignmentResponse
		if err := json.Unmarshal(resp.Body, &res); err != nil {
			return nil, fmt.Errorf("assignment from %s: %w", addr, err)
		}
		for _, a := range res.MessageQueueAssignments {
			if a.MessageQueue.Topic == topic && a.MessageQueue.BrokerName == name {
				out = append(out, MessageQueue(a.MessageQueue))
			}
		}
	}
	return out, nil
}

// msDuration converts milliseconds to a Duration.
func msDuration(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// storedMessage is used by tests and the transaction producer to decode
// one stored record.
func storedMessage(b []byte) (*MessageExt, error) {
	recs, err := message.DecodeRecords(b)
	if err != nil {
		return nil, err
	}
	if len(recs) != 1 {
		return nil, fmt.Errorf("client: %d records where one was expected", len(recs))
	}
	return fromRecord(recs[0], "")
}
