package broker

import (
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
)

// Pull request sysFlag bits.
const (
	pullCommitOffset = 0x1 // commitOffset carries the consumer's offset
	pullSuspend      = 0x2 // the pull may be held until a message arrives
	pullSubscription = 0x4 // the request carries its own subscription
	// 0x10 marks a Java lite pull consumer's pull, which its client sends
	// as LITE_PULL_MESSAGE (361) from 5.0 on, as PULL_MESSAGE before.
	// RocketMQ serves both alike (on a thread pool of their own), and so
	// does this broker: the bit changes nothing else.
)

// matchBatch is how many records a filter sees per Match call.
const matchBatch = 32

// pullRequest is a parsed PULL_MESSAGE or LITE_PULL_MESSAGE.
type pullRequest struct {
	conn       *remoting.Conn
	req        *remoting.Command
	group      string
	topic      string
	queueID    int32
	offset     int64
	maxMsgs    int
	sysFlag    int32
	suspend    time.Duration
	filter     Filter
	filterName string // "TYPE expression", for errors
	// maxBytes bounds the response's body: PullMaxBytes, or less when the
	// connection's budget for unwritten responses is short.
	maxBytes int
}

func (b *Broker) handlePull(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	start := time.Now()
	p := &pullRequest{conn: c, req: req, group: req.Get("consumerGroup"), topic: req.Get("topic")}
	var errs []error
	var err error
	p.queueID, err = req.Int32("queueId")
	errs = append(errs, err)
	p.offset, err = req.Int64("queueOffset")
	errs = append(errs, err)
	maxMsgs, err := req.Int32Or("maxMsgNums", DefaultPullMaxMsgs)
	errs = append(errs, err)
	p.sysFlag, err = req.Int32Or("sysFlag", 0)
	errs = append(errs, err)
	commit, err := req.Int64Or("commitOffset", 0)
	errs = append(errs, err)
	suspendMS, err := req.Int64Or("suspendTimeoutMillis", 0)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return response(req, remoting.SystemError, "pull: %v", err)
	}
	if err := checkGroup(p.group); err != nil {
		return response(req, remoting.SubscriptionGroupNotExist, "pull: %v", err)
	}
	if err := b.checkConfigured(p.group); err != nil {
		return response(req, remoting.SubscriptionGroupNotExist, "pull: %v", err)
	}
	if err := b.pullAllowed(p.group); err != nil {
		return response(req, remoting.NoPermission, "pull: %v", err)
	}
	// The lite pull consumer sends 0 unless told otherwise: that means the
	// default batch, not one message.
	p.maxMsgs = int(maxMsgs)
	if p.maxMsgs <= 0 {
		p.maxMsgs = DefaultPullMaxMsgs
	}
	p.maxMsgs = min(p.maxMsgs, 1024)
	p.suspend = min(time.Duration(suspendMS)*time.Millisecond, b.opts.MaxPullSuspend)

	tc, ok := b.topics.get(p.topic)
	if !ok {
		return response(req, remoting.TopicNotExist, "pull: topic %s does not exist", p.topic)
	}
	if tc.Perm&remoting.PermRead == 0 {
		return response(req, remoting.NoPermission, "pull: topic %s is not readable (perm %d)", p.topic, tc.Perm)
	}
	if p.queueID < 0 || int(p.queueID) >= tc.ReadQueueNums {
		return response(req, remoting.SystemError, "pull: queue %d does not exist in topic %s (%d read queues)", p.queueID, p.topic, tc.ReadQueueNums)
	}
	b.notePull(p.group, p.topic, p.queueID, p.offset)
	code, err := b.pullFilter(p)
	if err != nil {
		return response(req, code, "pull: %v", err)
	}
	if resp := b.lockedPull(p); resp != nil {
		return resp // before the commit: the holder's offset is not rewound
	}
	if p.sysFlag&pullCommitOffset != 0 && b.opts.ReplicaID == 0 {
		// The client's offset as it stood when the pull left: it only
		// moves the group's offset forward, since a commit sent after it
		// may have been served first. A commit the broker refuses does
		// not fail the pull: the client still gets its messages, and
		// commits again with the next one.
		if _, err := b.commitOffset(p.group, p.topic, p.queueID, commit, commitAdvance); err != nil {
			b.log.Debug("pull: commit offset refused", "group", logName(p.group), "topic", p.topic, "queue", p.queueID, "err", err)
		}
	}
	resp := b.pull(p, p.sysFlag&pullSuspend != 0 && p.suspend > 0)
	if resp != nil {
		b.meters.pull.Since(start) // a held pull is answered later, and not timed
	}
	return resp
}

// pullFilter resolves the subscription a pull applies: the request's own
// when it carries one, else the group's from its heartbeats.
func (b *Broker) pullFilter(p *pullRequest) (int16, error) {
	typ, expr := p.req.Get("expressionType"), p.req.Get("subscription")
	if p.sysFlag&pullSubscription == 0 {
		sub, ok := b.clients.subscription(p.group, p.topic)
		if !ok {
			return remoting.SubscriptionNotExist, errors.New("consumer group " + p.group + " has no subscription to " + p.topic + " (no heartbeat yet?)")
		}
		if sub.err != nil {
			return remoting.SubscriptionParseFailed, sub.err
		}
		p.filter, p.filterName = sub.filter, sub.typ+" "+sub.expr
		if group, ok := strings.CutPrefix(p.topic, RetryGroupTopicPrefix); ok && group == p.group {
			// A retried message is checked again against the group's
			// subscription to its original topic.
			p.filter, p.filterName = &retryFilter{subscription: b.clients.subscription, group: group, inner: sub.filter}, "retry "+group
		}
		return 0, nil
	}
	// The lite pull consumer always says TAG, even for an SQL92
	// subscription; its heartbeat carries the real type.
	if normalizeType(typ) == ExpressionTag {
		if sub, ok := b.clients.subscription(p.group, p.topic); ok && sub.expr == expr && sub.typ != ExpressionTag {
			typ = sub.typ
		}
	}
	f, err := b.filters.compile(typ, expr)
	if err != nil {
		return remoting.SubscriptionParseFailed, err
	}
	p.filter, p.filterName = f, typ+" "+expr
	return 0, nil
}

// pull runs one pull and answers it, or holds it when allowed and nothing
// is there yet.
func (b *Broker) pull(p *pullRequest, mayHold bool) *remoting.Command {
	if b.closing.Load() {
		// An error, not "nothing new": clients pull again at once after
		// that, and the official Go client waits out its 30 s pull timeout
		// for a pull the closing broker never read. After an error it
		// waits 3 s and pulls on a new connection, by when the broker may
		// be back (Shutdown).
		return response(p.req, remoting.SystemBusy, "broker %s is shutting down; pull again shortly", b.opts.BrokerName)
	}
	if resp := b.lockedPull(p); resp != nil {
		return resp // a held pull whose queue changed hands meanwhile
	}
	minOff, maxOff := b.store.QueueOffsets(p.topic, p.queueID)
	o := p.offset
	// A replica serves pulls while its set has no master, and may not have
	// applied all the master served: past its end is "not yet" there, as
	// on RocketMQ's slave. PULL_OFFSET_MOVED would make a Java consumer
	// drop the queue until the master is back.
	behind := b.opts.ReplicaID > 0 && o > maxOff
	switch {
	case !behind && (maxOff == 0 && o != 0 || o > maxOff), o < minOff:
		next := minOff
		if o > maxOff {
			next = maxOff
		}
		return pullResponse(p.req, remoting.PullOffsetMoved, next, minOff, maxOff, nil)
	case o >= maxOff:
		if mayHold && b.holds.hold(p) {
			return nil // answered when a message arrives or the hold times out
		}
		return pullResponse(p.req, remoting.PullNotFound, o, minOff, maxOff, nil)
	}
	// The body is sized to what the connection may still queue, so a
	// client that pulls and does not read its answers makes the broker
	// build no more than the budget (remoting.Conn.ReserveResponse).
	var budget remoting.Reservation
	p.maxBytes = b.opts.PullMaxBytes
	if p.conn != nil {
		budget = p.conn.ReserveResponse(b.opts.PullMaxBytes)
		if budget.Bytes() == 0 {
			return response(p.req, remoting.SystemBusy,
				"pull: this connection's unread answers (or the broker's, over all connections) are at their limit; read them and pull again")
		}
		p.maxBytes = budget.Bytes()
	}
	body, next, err := b.readMatching(p)
	if len(body) > 0 {
		b.meters.pulled(p.topic, body)
		resp := pullResponse(p.req, remoting.Success, next, minOff, b.store.MaxOffset(p.topic, p.queueID), body)
		resp.ReleaseBody = releasePullBody
		resp.Reservation = budget
		return resp
	}
	budget.Release()
	releasePullBody(body)
	switch {
	case err != nil:
		return pullResponse(p.req, remoting.SystemError, next, minOff, maxOff, nil, err.Error())
	case next == p.offset:
		return pullResponse(p.req, remoting.PullNotFound, next, minOff, maxOff, nil)
	}
	return pullResponse(p.req, remoting.PullRetryImmediately, next, minOff, maxOff, nil)
}

// readMatching scans the queue from p.offset and returns the stored bytes
// of the messages the filter accepts, and the offset after the last unit
// it scanned. A filter error stops the scan before the batch that failed,
// so no offset moves past a message that was not filtered.
func (b *Broker) readMatching(p *pullRequest) (body []byte, next int64, err error) {
	needsRecord := p.filter.NeedsRecord()
	opts := store.IterOptions{
		MaxUnits:   DefaultPullScanUnits,
		MaxRecords: p.maxMsgs,
		MaxBytes:   p.maxBytes,
		OnCorrupt: func(u store.Unit, err error) {
			b.log.Error("skipping a message lost to corruption", "topic", p.topic, "queue", p.queueID, "offset", u.QueueOffset, "err", err)
		},
	}
	var masks *maskReader
	if needsRecord {
		if masks = b.prefilter.masks(p.topic, p.queueID, p.filterName); masks != nil {
			opts.MaxUnits = prefilterScanUnits
		}
	}
	opts.Filter = func(u store.Unit) store.UnitVerdict {
		if !p.filter.MatchTagHash(u.TagCode) {
			return store.UnitSkip
		}
		if match, known := masks.says(u.QueueOffset); known && !match {
			b.prefilter.skipped.Add(1)
			return store.UnitSkip // pre-filtered out: never read
		}
		return store.UnitKeep
	}
	it := b.store.NewQueueIter(p.topic, p.queueID, opts)
	defer it.Close()
	var spans []span // the records in body, when the filter must see them
	for ok := it.SeekGE(p.offset); ok; ok = it.Next() {
		if gapFrom, gapTo := it.Gap(); gapFrom < gapTo {
			break // retention moved the queue; the next pull is told
		}
		r := it.Record()
		if body == nil {
			if n := min(p.maxBytes, p.maxMsgs*len(r)); len(r) < n {
				body = newPullBody(n)
			} else {
				// One record fills the body: exactly its size, not a
				// pooled class up to twice that.
				body = make([]byte, 0, len(r))
			}
		}
		at := len(body)
		body = append(body, r...)
		if needsRecord {
			match, _ := masks.says(it.Offset())
			spans = append(spans, span{at: at, end: len(body), off: it.Offset(), match: match})
		}
	}
	if err := it.Error(); err != nil {
		return nil, p.offset, err
	}
	next = it.NextOffset()
	if gapFrom, gapTo := it.Gap(); gapFrom < gapTo {
		next = gapFrom
	}
	if len(spans) == 0 {
		return body, next, nil
	}
	if failed, err := b.matchSpans(p, body, spans); err != nil {
		// Serve what matched before the failed message; resume there.
		return compact(body, spans[:failed]), spans[failed].off, err
	}
	return compact(body, spans), next, nil
}

// matchSpans runs the pull's filter, in batches, on the records of body the
// masks did not answer for, and sets their match. On a filter error it
// returns the index of the first span of the batch that failed.
func (b *Broker) matchSpans(p *pullRequest, body []byte, spans []span) (int, error) {
	var (
		batch = make([]int, 0, matchBatch)
		recs  = make([]message.Record, 0, matchBatch)
		res   [matchBatch]bool
	)
	for i := 0; i < len(spans); {
		batch, recs = batch[:0], recs[:0]
		for ; i < len(spans) && len(batch) < matchBatch; i++ {
			if !spans[i].match {
				batch = append(batch, i)
				recs = append(recs, message.Record(body[spans[i].at:spans[i].end]))
			}
		}
		if len(batch) == 0 {
			break
		}
		if err := p.filter.Match(recs, res[:len(batch)]); err != nil {
			b.filters.failed(p.filterName, err)
			return batch[0], errors.New("filter " + p.filterName + " failed: " + err.Error())
		}
		b.meters.filterEvals.Add(int64(len(batch)))
		for j, k := range batch {
			spans[k].match = res[j]
		}
	}
	return 0, nil
}

// span is a record's place in a pull body, and whether it matches.
type span struct {
	at, end int
	off     int64 // queue offset
	match   bool
}

// compact keeps the matching records of body, in order, in place.
func compact(body []byte, spans []span) []byte {
	out := body[:0]
	for _, s := range spans {
		if s.match {
			out = append(out, body[s.at:s.end]...)
		}
	}
	return out
}

func pullResponse(req *remoting.Command, code int16, next, minOff, maxOff int64, body []byte, remark ...string) *remoting.Command {
	resp := remoting.NewResponse(req, code, "")
	if len(remark) > 0 {
		resp.Remark = remark[0]
	}
	resp.ExtFields = map[string]string{
		"nextBeginOffset":      strconv.FormatInt(next, 10),
		"minOffset":            strconv.FormatInt(minOff, 10),
		"maxOffset":            strconv.FormatInt(maxOff, 10),
		"suggestWhichBrokerId": "0",
	}
	resp.Body = body
	return resp
}

// pullKey names a queue a consumer group pulls.
type pullKey struct {
	group, topic string
	queue        int32
}

// pulls is what the broker keeps of a group's pulls of a queue: how many,
// and the offset the last one asked for.
type pulls struct {
	count, offset atomic.Int64
}

// notePull records a group's pull of a queue, from offset.
func (b *Broker) notePull(group, topic string, queue int32, offset int64) {
	k := pullKey{group, topic, queue}
	v, ok := b.pulled.Load(k)
	if !ok {
		v, _ = b.pulled.LoadOrStore(k, new(pulls))
	}
	p := v.(*pulls)
	p.offset.Store(offset)
	p.count.Add(1)
}

// Pulled reports whether consumer group has pulled the queue since the
// broker started.
func (v View) Pulled(group, topic string, queue int32) bool { return v.Pulls(group, topic, queue) > 0 }

// Pulls returns how many pulls of the queue consumer group has made since
// the broker started (or the topic was last deleted).
func (v View) Pulls(group, topic string, queue int32) int64 {
	if p, ok := v.b.pulled.Load(pullKey{group, topic, queue}); ok {
		return p.(*pulls).count.Load()
	}
	return 0
}
