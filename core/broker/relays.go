package broker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// Operator relays: requests an admin sends the broker that the broker
// answers by asking a consumer group's clients, over the connections
// their heartbeats came on.
//
//	+----------------------------------+------------------------------------+-----------------------------+
//	| admin request                    | relayed to clients as              | answer                      |
//	+----------------------------------+------------------------------------+-----------------------------+
//	| INVOKE_BROKER_TO_RESET_OFFSET    | RESET_CONSUMER_CLIENT_OFFSET (220),| the offset table set        |
//	|   (222): topic, group,           |   oneway, to every live consumer   |   ({"offsetTable":{mq:off}})|
//	|   timestamp, isForce, [queueId,  |   of the group, after the offsets  |                             |
//	|   offset]                        |   are stored                       |                             |
//	| INVOKE_BROKER_TO_GET_CONSUMER_   | GET_CONSUMER_STATUS_FROM_CLIENT    | {"consumerTable":{clientId: |
//	|   STATUS (223): topic, group,    |   (221) to each live consumer (or  |   {mq:off}},                |
//	|   [clientAddr: a client id]      |   the one named)                   |   "messageQueueTable":{}}   |
//	| GET_CONSUMER_RUNNING_INFO (307): | the same request, to the client    | the client's answer as is   |
//	|   consumerGroup, clientId,       |                                    |                             |
//	|   jstackEnable                   |                                    |                             |
//	| CONSUME_MESSAGE_DIRECTLY (309):  | the same request with the stored   | the client's answer as is   |
//	|   consumerGroup, clientId, msgId |   message as body and brokerName   |                             |
//	|   (an offset message id)         |                                    |                             |
//	+----------------------------------+------------------------------------+-----------------------------+
//
// Offset tables are queue-keyed maps in fastjson's form
// (remoting.AppendQueueOffsets). Every relay waits at most relayTimeout
// for a client's answer, and at most maxRelays relays are in flight at
// once, across all admins, so a busy admin cannot pile up goroutines; a
// relay beyond it is answered SYSTEM_BUSY. A client that is not
// connected is answered CONSUMER_NOT_ONLINE, one that does not answer in
// time SYSTEM_ERROR, each remark naming the client and the group.

// Relay bounds.
const (
	// defaultRelayTimeout bounds the wait for one client's answer; it is
	// below the official tools' own timeouts for these requests (5 s to
	// 10 s), so the admin hears which client was silent.
	defaultRelayTimeout = 4 * time.Second
	// maxRelays bounds the relays in flight.
	maxRelays = 64
	// statusFanOut bounds the clients one status request asks at once.
	statusFanOut = 16
)

// relayLimits bound the relays to clients.
type relayLimits struct {
	slots chan struct{} // one per relay in flight
	// wait is the per-relay timeout in nanoseconds (defaultRelayTimeout;
	// tests change it, export_test.go).
	wait atomic.Int64
}

func newRelayLimits() *relayLimits {
	l := &relayLimits{slots: make(chan struct{}, maxRelays)}
	l.wait.Store(int64(defaultRelayTimeout))
	return l
}

func (l *relayLimits) timeout() time.Duration { return time.Duration(l.wait.Load()) }

// errRelayBusy is what a relay gets when maxRelays are in flight.
var errRelayBusy = fmt.Errorf("broker: %d relays to clients in flight, the limit; try again", maxRelays)

// relayTarget is one live client of a consumer group.
type relayTarget struct {
	clientID string
	conn     *remoting.Conn
}

// consumerTargets returns a consumer group's members with a live
// connection, by client id.
func (t *clientTable) consumerTargets(group string) []relayTarget {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.consumers[group]
	if g == nil {
		return nil
	}
	var out []relayTarget
	for id, m := range g.members {
		if !isClosed(m.conn) {
			out = append(out, relayTarget{clientID: id, conn: m.conn})
		}
	}
	slices.SortFunc(out, func(a, b relayTarget) int { return strings.Compare(a.clientID, b.clientID) })
	return out
}

// consumerTarget returns the live connection of one client of a group.
func (t *clientTable) consumerTarget(group, clientID string) (relayTarget, bool) {
	for _, rt := range t.consumerTargets(group) {
		if rt.clientID == clientID {
			return rt, true
		}
	}
	return relayTarget{}, false
}

// relay sends req to a client and waits for its answer. The error's
// code is the one to answer the admin with.
func (b *Broker) relay(rt relayTarget, group string, req *remoting.Command) (*remoting.Command, int16, error) {
	select {
	case b.relays.slots <- struct{}{}:
		defer func() { <-b.relays.slots }()
	default:
		return nil, remoting.SystemBusy, errRelayBusy
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.relays.timeout())
	defer cancel()
	resp, err := rt.conn.Request(ctx, req)
	switch {
	case err == nil:
		return resp, remoting.Success, nil
	case errors.Is(err, context.DeadlineExceeded):
		return nil, remoting.SystemError, fmt.Errorf("client %s of consumer group %s did not answer %s within %v",
			rt.clientID, group, remoting.RequestCode(req.Code), b.relays.timeout())
	case errors.Is(err, remoting.ErrClosed):
		return nil, remoting.ConsumerNotOnline, fmt.Errorf("client %s of consumer group %s went away before answering %s",
			rt.clientID, group, remoting.RequestCode(req.Code))
	default:
		return nil, remoting.SystemError, fmt.Errorf("relaying %s to client %s of consumer group %s: %v",
			remoting.RequestCode(req.Code), rt.clientID, group, err)
	}
}

// resettable reports why an admin may not reset a group's offsets, or
// nil: the group must be known (retry.go's knownGroup) or have committed
// offsets, so an admin's typo does not create offsets for a group nobody
// runs.
func (b *Broker) resettable(group string) error {
	err := b.knownGroup(group)
	if err != nil && !errors.Is(err, ErrBadGroup) && !errors.Is(err, ErrGroupNotConfigured) && len(b.store.ConsumerOffsets(group)) > 0 {
		return nil
	}
	return err
}

// handleResetOffset serves INVOKE_BROKER_TO_RESET_OFFSET. For each read
// queue of the topic (or the one queueId names) the target is the given
// offset, or the first offset stored at or after timestamp (-1: the max
// offset). As in RocketMQ, without isForce an offset only moves back: a
// queue whose committed offset is already below its target keeps it. The
// broker stores the offsets itself, so a group with no consumer online
// starts from them, and then tells every live consumer of the group
// (RESET_CONSUMER_CLIENT_OFFSET, oneway: the clients do not answer it),
// which drops what it holds of those queues and pulls again from there.
func (b *Broker) handleResetOffset(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	a := ResetArgs{Topic: req.Get("topic"), Group: req.Get("group")}
	var terr, ferr, qerr, oerr error
	a.Timestamp, terr = req.Int64Or("timestamp", noTimestamp)
	a.Force, ferr = req.BoolOr("isForce", false)
	a.QueueID, qerr = req.Int32Or("queueId", -1)
	a.Offset, oerr = req.Int64Or("offset", -1)
	if err := errors.Join(terr, ferr, qerr, oerr); err != nil {
		return response(req, remoting.SystemError, "reset offset: %v", err)
	}
	res, code, err := b.resetOffsets(a)
	if err != nil {
		return response(req, code, "reset offset: %v", err)
	}
	table := make([]remoting.QueueOffset, len(res.Offsets))
	for i, o := range res.Offsets {
		table[i] = remoting.QueueOffset{Queue: remoting.QueueKey{BrokerName: b.opts.BrokerName, QueueID: o.QueueID, Topic: a.Topic}, Offset: o.Offset}
	}
	resp := remoting.NewResponse(req, remoting.Success, res.Remark)
	resp.Body = append(remoting.AppendQueueOffsets([]byte(`{"offsetTable":`), table), '}')
	return resp
}

// noTimestamp marks a reset request without a timestamp.
const noTimestamp = -2

// ResetArgs are the arguments of an offset reset: the 222 request's
// header fields, and the offsets.reset admin command's JSON.
type ResetArgs struct {
	Group string `json:"group"`
	Topic string `json:"topic"`
	// Timestamp is the time (Unix ms) to reset to; -1 means the newest
	// offset.
	Timestamp int64 `json:"timestamp"`
	// Force lets an offset move forward.
	Force bool `json:"force"`
	// QueueID, when not -1, limits the reset to one queue, and Offset,
	// when not -1, is that queue's offset (instead of Timestamp's).
	QueueID int32 `json:"queueId"`
	Offset  int64 `json:"offset"`
}

// ResetResult is what a reset did.
type ResetResult struct {
	Offsets []ResetOffset `json:"offsets"`
	// Online are the group's live consumers, Told those that were sent
	// the new offsets.
	Online []string `json:"online"`
	Told   []string `json:"told"`
	Remark string   `json:"remark"`
}

// ResetOffset is one queue's offset after a reset.
type ResetOffset struct {
	QueueID int32 `json:"queueId"`
	Offset  int64 `json:"offset"`
}

// resetOffsets resets a group's offsets on a topic and tells its live
// consumers (handleResetOffset's comment has the rules). The error's
// code is the one to answer with.
func (b *Broker) resetOffsets(a ResetArgs) (ResetResult, int16, error) {
	var res ResetResult
	if err := b.resettable(a.Group); err != nil {
		return res, remoting.SubscriptionGroupNotExist, err
	}
	tc, ok := b.topics.get(a.Topic)
	if !ok {
		return res, remoting.TopicNotExist, fmt.Errorf("topic %s does not exist", logName(a.Topic))
	}
	switch {
	case a.Offset < 0 && a.Timestamp == noTimestamp:
		return res, remoting.SystemError, errors.New("timestamp (ms, or -1 for the newest offset) or queueId and offset are required")
	case a.Offset >= 0 && a.QueueID < 0:
		return res, remoting.SystemError, errors.New("an offset needs the queueId it is for")
	case a.QueueID >= int32(tc.ReadQueueNums):
		return res, remoting.SystemError, fmt.Errorf("queue %d does not exist in topic %s (%d read queues)", a.QueueID, a.Topic, tc.ReadQueueNums)
	}
	var table []remoting.QueueOffset
	for q := range int32(tc.ReadQueueNums) {
		if a.QueueID >= 0 && q != a.QueueID {
			continue
		}
		to, err := b.resetTarget(a.Topic, q, a.Timestamp, a.Offset)
		if err != nil {
			return res, remoting.SystemError, err
		}
		committed, has := b.store.ConsumerOffset(a.Group, a.Topic, q)
		if has && !a.Force && a.Offset < 0 && committed <= to {
			to = committed
		}
		if !has || to != committed {
			if code, err := b.commitOffset(a.Group, a.Topic, q, to, commitSync); err != nil {
				return res, code, fmt.Errorf("group %s, %s queue %d: %w", a.Group, a.Topic, q, err)
			}
		}
		table = append(table, remoting.QueueOffset{Queue: remoting.QueueKey{BrokerName: b.opts.BrokerName, QueueID: q, Topic: a.Topic}, Offset: to})
		res.Offsets = append(res.Offsets, ResetOffset{QueueID: q, Offset: to})
	}
	body := append(remoting.AppendQueueOffsets([]byte(`{"offsetTable":`), table), '}')
	ext := map[string]string{"topic": a.Topic, "group": a.Group, "timestamp": strconv.FormatInt(a.Timestamp, 10), "isForce": strconv.FormatBool(a.Force)}
	res.Online, res.Told = []string{}, []string{}
	for _, rt := range b.clients.consumerTargets(a.Group) {
		res.Online = append(res.Online, rt.clientID)
		ctx, cancel := context.WithTimeout(context.Background(), b.relays.timeout())
		err := rt.conn.Oneway(ctx, remoting.NewRequest(remoting.ResetConsumerClientOffset, ext, body))
		cancel()
		if err != nil {
			b.log.Warn("reset offset stored, but a consumer was not told", "group", a.Group, "topic", a.Topic, "client", rt.clientID, "err", err)
			continue
		}
		res.Told = append(res.Told, rt.clientID)
	}
	b.log.Info("consumer offsets reset", "group", a.Group, "topic", a.Topic, "timestamp", a.Timestamp, "force", a.Force,
		"queues", len(table), "online", len(res.Online), "told", len(res.Told))
	res.Remark = "no consumer online; the group starts from these offsets"
	if len(res.Online) > 0 {
		res.Remark = fmt.Sprintf("told %d of %d online consumers", len(res.Told), len(res.Online))
	}
	return res, remoting.Success, nil
}

// handleResetAdmin is the offsets.reset admin command (broker admin
// offsets reset): resetOffsets with JSON arguments.
func (b *Broker) handleResetAdmin(ctx context.Context, args json.RawMessage) (any, error) {
	a := ResetArgs{Timestamp: noTimestamp, QueueID: -1, Offset: -1}
	if err := decodeArgs(args, &a); err != nil {
		return nil, err
	}
	res, _, err := b.resetOffsets(a)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// resetTarget is the offset a reset moves a queue to: offset when it is
// set (it must be within the queue), the newest for timestamp -1, else
// the first offset stored at or after timestamp.
func (b *Broker) resetTarget(topic string, q int32, ts, offset int64) (int64, error) {
	minOff, maxOff := b.store.QueueOffsets(topic, q)
	switch {
	case offset >= 0:
		if offset < max(minOff, 0) || offset > max(maxOff, 0) {
			return 0, fmt.Errorf("target offset %d is outside %s queue %d's %d..%d", offset, topic, q, max(minOff, 0), max(maxOff, 0))
		}
		return offset, nil
	case ts < 0:
		return max(maxOff, 0), nil
	}
	off, err := b.store.OffsetForTimestamp(topic, q, ts)
	if err != nil {
		return 0, fmt.Errorf("%s queue %d: offset at %d: %w", topic, q, ts, err)
	}
	return off, nil
}

// handleConsumerStatus serves INVOKE_BROKER_TO_GET_CONSUMER_STATUS: the
// offsets each live consumer of the group holds for the topic, asked of
// statusFanOut clients at a time. The first client that failed to answer
// is named in the remark, with a count of the others; when none answers
// the request fails.
func (b *Broker) handleConsumerStatus(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, group, only := req.Get("topic"), req.Get("group"), req.Get("clientAddr")
	if err := checkGroup(group); err != nil {
		return response(req, remoting.SubscriptionGroupNotExist, "get consumer status: %v", err)
	}
	targets := b.clients.consumerTargets(group)
	if only != "" {
		targets = slices.DeleteFunc(targets, func(rt relayTarget) bool { return rt.clientID != only })
	}
	if len(targets) == 0 {
		if only != "" {
			return response(req, remoting.ConsumerNotOnline, "get consumer status: client %s of consumer group %s is not online", logName(only), logName(group))
		}
		return response(req, remoting.ConsumerNotOnline, "get consumer status: the consumer group %s is not online", logName(group))
	}
	type answer struct {
		table []remoting.QueueOffset
		err   error
	}
	answers := make([]answer, len(targets))
	var wg sync.WaitGroup
	sem := make(chan struct{}, statusFanOut)
	for i, rt := range targets {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ext := map[string]string{"topic": topic, "group": group, "clientAddr": rt.clientID}
			resp, _, err := b.relay(rt, group, remoting.NewRequest(remoting.GetConsumerStatusFromClient, ext, nil))
			if err == nil {
				answers[i].table, err = consumerStatusTable(resp)
				if err != nil {
					err = fmt.Errorf("client %s of consumer group %s: %w", rt.clientID, group, err)
				}
			}
			answers[i].err = err
		})
	}
	wg.Wait()
	body := []byte(`{"consumerTable":{`)
	var failed firstError
	n := 0
	for i, a := range answers {
		if a.err != nil {
			failed.add(remoting.SystemError, a.err.Error())
			continue
		}
		if n > 0 {
			body = append(body, ',')
		}
		n++
		body = strconv.AppendQuote(body, targets[i].clientID)
		body = append(body, ':')
		body = remoting.AppendQueueOffsets(body, a.table)
	}
	body = append(body, `},"messageQueueTable":{}}`...)
	if n == 0 {
		return response(req, remoting.SystemError, "get consumer status: no client answered: %s%s", failed.remark, failed.more())
	}
	resp := remoting.NewResponse(req, remoting.Success, failed.remark+failed.more())
	resp.Body = body
	return resp
}

// consumerStatusTable reads a client's GET_CONSUMER_STATUS_FROM_CLIENT
// answer: {"messageQueueTable":{mq:offset,…}}.
func consumerStatusTable(resp *remoting.Command) ([]remoting.QueueOffset, error) {
	if resp.Code != remoting.Success {
		return nil, fmt.Errorf("answered %s %s", remoting.ResponseCode(resp.Code), resp.Remark)
	}
	raw, err := remoting.FastjsonField(resp.Body, "messageQueueTable")
	if err != nil || raw == nil {
		return nil, fmt.Errorf("answer without a readable messageQueueTable (%v)", err)
	}
	return remoting.ParseQueueOffsets(raw)
}

// handleRunningInfo serves GET_CONSUMER_RUNNING_INFO: the named client's
// own answer.
func (b *Broker) handleRunningInfo(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	group, clientID := req.Get("consumerGroup"), req.Get("clientId")
	ext := map[string]string{"consumerGroup": group, "clientId": clientID, "jstackEnable": req.Get("jstackEnable")}
	if ext["jstackEnable"] == "" {
		ext["jstackEnable"] = "false"
	}
	return b.relayToClient(req, group, clientID, remoting.NewRequest(remoting.GetConsumerRunningInfo, ext, nil))
}

// handleConsumeDirectly serves CONSUME_MESSAGE_DIRECTLY: the message its
// msgId (an offset message id) names is handed to the named client's
// listener, and the client's report is the answer.
func (b *Broker) handleConsumeDirectly(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	group, clientID, msgID := req.Get("consumerGroup"), req.Get("clientId"), req.Get("msgId")
	_, off, err := message.ParseOffsetMsgID(msgID)
	if err != nil {
		return response(req, remoting.SystemError, "consume message directly: msgId must be the message's offset message id: %v", err)
	}
	r, err := b.store.ReadRecordAt(off)
	if err != nil {
		return response(req, remoting.SystemError, "consume message directly: message %s: %v", msgID, err)
	}
	if topic := string(r.Topic()); systemTopic(topic) || topic == TxnCheckMaxTopic {
		return response(req, remoting.NoPermission, "consume message directly: message %s is in %s, reserved for the broker", msgID, topic)
	}
	ext := map[string]string{"consumerGroup": group, "clientId": clientID, "msgId": msgID, "brokerName": b.opts.BrokerName}
	return b.relayToClient(req, group, clientID, remoting.NewRequest(remoting.ConsumeMessageDirectly, ext, r))
}

// relayToClient relays fwd to one client of a group and answers req with
// the client's answer as it came: code, remark and body.
func (b *Broker) relayToClient(req *remoting.Command, group, clientID string, fwd *remoting.Command) *remoting.Command {
	what := strings.ToLower(strings.ReplaceAll(remoting.RequestCode(fwd.Code).String(), "_", " "))
	if err := checkGroup(group); err != nil {
		return response(req, remoting.SubscriptionGroupNotExist, "%s: %v", what, err)
	}
	rt, ok := b.clients.consumerTarget(group, clientID)
	if !ok {
		return response(req, remoting.ConsumerNotOnline, "%s: client %s of consumer group %s is not online at this broker",
			what, logName(clientID), logName(group))
	}
	got, code, err := b.relay(rt, group, fwd)
	if err != nil {
		return response(req, code, "%s: %v", what, err)
	}
	resp := remoting.NewResponse(req, got.Code, got.Remark)
	resp.Body = got.Body
	return resp
}
