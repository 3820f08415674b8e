package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// ProducerOptions configures a Producer. The zero value of each field
// means its default, except Group and Client.NameServers, which are
// required.
type ProducerOptions struct {
	// Client configures the shared client instance.
	Client ClientOptions
	// Group is the producer group. Required. Brokers send transaction
	// checks to a live member of the group.
	Group string
	// SendTimeout bounds a send, its retries included; default 3 s. A
	// context deadline that comes first wins.
	SendTimeout time.Duration
	// RetryTimes is how many more tries a failed sync send gets, each on
	// another queue and preferably another broker; default 2. Negative
	// means none. Async and oneway sends are never retried.
	RetryTimes int
	// CompressThreshold is the body size in bytes above which a single
	// message's body is zlib-compressed and flagged (sysFlag 0x1), as
	// RocketMQ clients do; default 4096. Negative turns compression off.
	// Batches are never compressed.
	CompressThreshold int
	// CompressLevel is the zlib level, 1 (fastest) to 9 (smallest);
	// default 5.
	CompressLevel int
	// MaxMessageSize bounds a body, or the encoded body of a batch, in
	// bytes before compression; default 4 MiB, the broker's default
	// limit. Larger messages are refused with ErrMessageTooLarge.
	MaxMessageSize int
	// Selector picks the queue of each send. Default: round robin per
	// topic that skips brokers the latency fault tracker holds out and,
	// on a retry, the broker that just failed. A Selector set here is
	// used as given, for first tries and retries alike.
	Selector QueueSelector
	// DefaultTopicQueueNums is the queue count asked for when the broker
	// creates a topic on its first send (the TBW102 fallback); default 4.
	DefaultTopicQueueNums int
	// DisableLatencyFault turns off latency fault avoidance: by default
	// a broker whose send failed or was slow (≥ 550 ms) is skipped by the
	// default selector for 30 s to 10 min, as RocketMQ's
	// sendLatencyFaultEnable does.
	DisableLatencyFault bool
}

// Defaults of ProducerOptions.
const (
	DefaultSendTimeout           = 3 * time.Second
	DefaultRetryTimes            = 2
	DefaultCompressThreshold     = 4096
	DefaultCompressLevel         = 5
	DefaultMaxMessageSize        = 4 << 20
	DefaultDefaultTopicQueueNums = 4
)

// withDefaults returns a copy of o with defaults filled in, or every
// problem found.
func (o ProducerOptions) withDefaults() (ProducerOptions, error) {
	var problems []string
	client, err := o.Client.withDefaults()
	if err != nil {
		problems = append(problems, err.Error())
	}
	o.Client = client
	if o.Group == "" {
		problems = append(problems, "Group is empty")
	} else if err := remoting.ValidateTopicName(o.Group); err != nil {
		problems = append(problems, "Group: "+err.Error())
	}
	if o.SendTimeout < 0 {
		problems = append(problems, fmt.Sprintf("SendTimeout %v is negative", o.SendTimeout))
	}
	if o.CompressLevel < 0 || o.CompressLevel > 9 {
		problems = append(problems, fmt.Sprintf("CompressLevel %d is not in 1..9", o.CompressLevel))
	}
	if o.MaxMessageSize < 0 {
		problems = append(problems, fmt.Sprintf("MaxMessageSize %d is negative", o.MaxMessageSize))
	}
	if o.DefaultTopicQueueNums < 0 {
		problems = append(problems, fmt.Sprintf("DefaultTopicQueueNums %d is negative", o.DefaultTopicQueueNums))
	}
	if len(problems) > 0 {
		return o, errors.New("client: invalid ProducerOptions: " + strings.Join(problems, "; "))
	}
	if o.SendTimeout == 0 {
		o.SendTimeout = DefaultSendTimeout
	}
	switch {
	case o.RetryTimes == 0:
		o.RetryTimes = DefaultRetryTimes
	case o.RetryTimes < 0:
		o.RetryTimes = 0
	}
	if o.CompressThreshold == 0 {
		o.CompressThreshold = DefaultCompressThreshold
	}
	if o.CompressLevel == 0 {
		o.CompressLevel = DefaultCompressLevel
	}
	if o.MaxMessageSize == 0 {
		o.MaxMessageSize = DefaultMaxMessageSize
	}
	if o.DefaultTopicQueueNums == 0 {
		o.DefaultTopicQueueNums = DefaultDefaultTopicQueueNums
	}
	return o, nil
}

// SendStatus is how a broker stored a message. Every status counts as
// sent; the ones other than SendOK warn that the message is not yet as
// durable as the broker is configured to make it.
type SendStatus int

const (
	SendOK                SendStatus = iota // stored
	SendFlushDiskTimeout                    // stored, not flushed in time (sync flush)
	SendFlushSlaveTimeout                   // stored, not replicated in time (sync replication)
	SendSlaveNotAvailable                   // stored, no slave to replicate to (sync replication)
)

func (s SendStatus) String() string {
	switch s {
	case SendOK:
		return "SEND_OK"
	case SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	}
	return "SendStatus(" + strconv.Itoa(int(s)) + ")"
}

// SendResult is a broker's answer to a send.
type SendResult struct {
	Status SendStatus
	// MsgID is the message's UNIQ_KEY; for a batch, the UNIQ_KEYs of its
	// messages joined with ",".
	MsgID string
	// OffsetMsgID is the broker's id of the stored message (its address
	// and commit-log offset); for a batch, the ids joined with ",".
	OffsetMsgID string
	// Queue is the queue the message went to.
	Queue MessageQueue
	// QueueOffset is the message's offset in Queue; for a batch, the
	// first message's. For a transaction's half message it is the offset
	// in the broker's half queue.
	QueueOffset   int64
	TransactionID string
	RegionID      string
	// RecallHandle recalls a delayed message while it waits
	// (Producer.Recall); empty for any other.
	RecallHandle string
}

func (r *SendResult) String() string {
	return fmt.Sprintf("%s %s %s offset %d", r.Status, r.MsgID, r.Queue, r.QueueOffset)
}

// Producer sends messages. It is safe for concurrent use.
type Producer struct {
	opts     ProducerOptions
	log      *slog.Logger
	fault    *faultTracker // nil when DisableLatencyFault
	rr       roundRobin    // the default selector's counters
	listener TransactionListener

	// quit is closed by Shutdown; wg tracks async sends and transaction
	// check workers, which Shutdown waits for.
	quit   chan struct{}
	wg     sync.WaitGroup
	checks chan transactionCheck

	mu struct {
		sync.Mutex
		state  producerState
		in     *instance
		topics map[string]struct{} // topics sent to, whose routes the instance refreshes
	}
}

type producerState int

const (
	producerNew producerState = iota
	producerStarted
	producerShutdown
)

// NewProducer checks opts and returns a producer to Start. Every problem
// with opts is reported at once.
func NewProducer(opts ProducerOptions) (*Producer, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	p := &Producer{
		opts: opts,
		log:  opts.Client.Logger.With("producer", opts.Group),
		quit: make(chan struct{}),
	}
	if !opts.DisableLatencyFault {
		p.fault = newFaultTracker(nil)
	}
	p.mu.topics = make(map[string]struct{})
	return p, nil
}

// Start joins the client instance of the producer's client id, registers
// the group with it and sends a heartbeat. Starting a producer twice, or
// after Shutdown, is a bug and panics.
func (p *Producer) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.state != producerNew {
		panic("client: Producer.Start called twice or after Shutdown")
	}
	in, err := acquireInstance(p.opts.Client)
	if err != nil {
		return err
	}
	if err := in.registerProducer(p.opts.Group, p); err != nil {
		in.release()
		return err
	}
	p.mu.in = in
	p.mu.state = producerStarted
	if p.listener != nil {
		p.startCheckWorkers()
	}
	if p.fault != nil {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.probeFaults()
		}()
	}
	// Only brokers known from a route get heartbeats, so this reaches
	// brokers that other members of the instance already use; the rest
	// learn the group from the send header and the next heartbeat.
	_ = in.heartbeat()
	return nil
}

// Shutdown waits for async sends and transaction checks under way, tells
// the brokers the group has left and leaves the client instance. ctx bounds
// the wait. Calling it again, or on a producer never started, does nothing.
func (p *Producer) Shutdown(ctx context.Context) error {
	p.mu.Lock()
	if p.mu.state != producerStarted {
		p.mu.state = producerShutdown
		p.mu.Unlock()
		return nil
	}
	p.mu.state = producerShutdown
	in := p.mu.in
	p.mu.Unlock()
	close(p.quit)
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	var waitErr error
	select {
	case <-done:
	case <-ctx.Done():
		waitErr = fmt.Errorf("client: producer %s: waiting for sends under way: %w", p.opts.Group, ctx.Err())
	}
	err := errors.Join(waitErr, in.unregister(p.opts.Group, ""))
	if waitErr != nil {
		// Sends still running use the instance; keep it until they end.
		go func() {
			<-done
			in.release()
		}()
		return err
	}
	in.release()
	return err
}

// instance returns the client instance while the producer runs.
func (p *Producer) instance() (*instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.state != producerStarted {
		return nil, fmt.Errorf("%w: producer %s", ErrNotStarted, p.opts.Group)
	}
	return p.mu.in, nil
}

// Queues returns the queues of topic a send may go to, from the name
// servers' route (RocketMQ's fetchPublishMessageQueues).
func (p *Producer) Queues(ctx context.Context, topic string) ([]MessageQueue, error) {
	in, err := p.instance()
	if err != nil {
		return nil, err
	}
	r, err := in.updateRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	return slices.Clone(r.writeQueues), nil
}

// topics lists the topics sent to (producerMember).
func (p *Producer) topics() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.mu.topics))
	for t := range p.mu.topics {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// SendSync sends msgs and waits for the broker's answer, retrying failures
// that another broker may not have (ProducerOptions.RetryTimes). More than
// one message is sent as one batch: all to one queue, stored all or
// nothing; the messages must share a topic and have no delay. Messages
// without a UNIQ_KEY get one, written into their Properties.
func (p *Producer) SendSync(ctx context.Context, msgs ...*Message) (*SendResult, error) {
	in, err := p.instance()
	if err != nil {
		return nil, err
	}
	o, err := p.prepare(msgs, false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.SendTimeout)
	defer cancel()
	return p.sendLoop(ctx, o.topic, 1+p.opts.RetryTimes,
		func(ctx context.Context) ([]MessageQueue, error) { return p.writeQueues(ctx, in, o.topic) },
		func(qs []MessageQueue, lastBroker string) MessageQueue { return p.selectQueue(msgs[0], qs, lastBroker) },
		func(ctx context.Context, q MessageQueue) (*SendResult, error) { return p.sendTo(ctx, in, o, q, false) })
}

// SendSyncTo sends msgs like SendSync, to the queue selector picks with
// arg: NewHashSelector with a key as arg keeps all messages of that key in
// one queue, in send order. The send is retried on the same selection only
// (a retry elsewhere would break the order), so RetryTimes applies to
// failures to reach the broker.
func (p *Producer) SendSyncTo(ctx context.Context, selector QueueSelector, arg any, msgs ...*Message) (*SendResult, error) {
	if selector == nil {
		panic("client: SendSyncTo with a nil selector")
	}
	in, err := p.instance()
	if err != nil {
		return nil, err
	}
	o, err := p.prepare(msgs, false)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.SendTimeout)
	defer cancel()
	qs, err := p.writeQueues(ctx, in, o.topic)
	if err != nil {
		return nil, err
	}
	q := selector.Select(msgs[0], qs, arg)
	if !slices.Contains(qs, q) {
		return nil, fmt.Errorf("%w: selector picked %s, which is not a writable queue of %s", ErrNoQueue, q, o.topic)
	}
	return p.sendLoop(ctx, o.topic, 1+p.opts.RetryTimes,
		func(context.Context) ([]MessageQueue, error) { return []MessageQueue{q}, nil },
		func([]MessageQueue, string) MessageQueue { return q },
		func(ctx context.Context, q MessageQueue) (*SendResult, error) {
			res, err := p.sendTo(ctx, in, o, q, false)
			var be *BrokerError
			if errors.As(err, &be) {
				err = errNoRetry{err}
			}
			return res, err
		})
}

// SendAsync sends msgs once, without retries, and calls callback with the
// outcome from another goroutine. It returns an error, and does not call
// callback, when the send cannot start: the producer is not running or the
// messages are invalid. ctx bounds the whole send, also after SendAsync
// returns. Shutdown waits for sends under way. When the topic's route and
// a connection to the chosen broker are at hand, as for all but the first
// sends, the request is queued before SendAsync returns and no goroutine
// waits for the answer; only the callback gets one.
func (p *Producer) SendAsync(ctx context.Context, callback func(*SendResult, error), msgs ...*Message) error {
	if callback == nil {
		panic("client: SendAsync with a nil callback")
	}
	o, err := p.prepare(msgs, false)
	if err != nil {
		return err
	}
	p.mu.Lock()
	if p.mu.state != producerStarted {
		p.mu.Unlock()
		return fmt.Errorf("%w: producer %s", ErrNotStarted, p.opts.Group)
	}
	in := p.mu.in
	p.wg.Add(1)
	p.mu.Unlock()
	if p.sendAsyncNow(ctx, in, o, msgs[0], callback) {
		return nil
	}
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(ctx, p.opts.SendTimeout)
		defer cancel()
		callback(p.sendOnce(ctx, in, o, msgs[0], false))
	}()
	return nil
}

// sendAsyncNow sends o when its topic's route and the chosen broker's
// address are known, without a goroutine waiting for the answer: the
// request is queued here and the answer read on the connection's reader,
// which starts a goroutine only to run callback (which may block). It
// reports false, having sent nothing, when a lookup or a dial is needed
// first; SendAsync then does the whole send on a goroutine.
func (p *Producer) sendAsyncNow(ctx context.Context, in *instance, o *outgoing, first *Message, callback func(*SendResult, error)) bool {
	r := in.cachedRoute(o.topic)
	if r == nil || len(r.writeQueues) == 0 {
		return false
	}
	p.mu.Lock()
	p.mu.topics[o.topic] = struct{}{} // keep the route refreshed, as writeQueues does
	p.mu.Unlock()
	q := p.selectQueue(first, r.writeQueues, "")
	addr, ok := in.masterAddr(q.BrokerName)
	if !ok || !in.rc.Connected(addr) {
		return false
	}
	start := time.Now()
	err := in.rc.InvokeAsync(ctx, addr, p.request(o, q), p.opts.SendTimeout, func(resp *remoting.Command, err error) {
		p.fault.record(q, time.Since(start), err != nil)
		var res *SendResult
		if err != nil {
			err = fmt.Errorf("client: send to %s (%s): %w", q.BrokerName, addr, err)
		} else {
			res, err = p.result(o, q, resp)
		}
		go func() {
			defer p.wg.Done()
			callback(res, err)
		}()
	})
	return err == nil
}

// SendOneway sends msgs once without waiting for the broker's answer; it
// returns once the request is written. Lost messages go unnoticed.
func (p *Producer) SendOneway(ctx context.Context, msgs ...*Message) error {
	in, err := p.instance()
	if err != nil {
		return err
	}
	o, err := p.prepare(msgs, false)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.SendTimeout)
	defer cancel()
	_, err = p.sendOnce(ctx, in, o, msgs[0], true)
	return err
}

// sendOnce picks a queue and sends to it once.
func (p *Producer) sendOnce(ctx context.Context, in *instance, o *outgoing, first *Message, oneway bool) (*SendResult, error) {
	qs, err := p.writeQueues(ctx, in, o.topic)
	if err != nil {
		return nil, err
	}
	return p.sendTo(ctx, in, o, p.selectQueue(first, qs, ""), oneway)
}

// errNoRetry marks an error that sendLoop must not retry.
type errNoRetry struct{ error }

func (e errNoRetry) Unwrap() error { return e.error }

// sendLoop tries a send up to tries times: each try lists the queues, picks
// one (told the broker of the previous failed try) and sends. It stops at
// the first success, at an error that another try cannot fix, or when ctx
// ends.
func (p *Producer) sendLoop(ctx context.Context, topic string, tries int,
	queues func(context.Context) ([]MessageQueue, error),
	pick func(qs []MessageQueue, lastBroker string) MessageQueue,
	send func(context.Context, MessageQueue) (*SendResult, error),
) (*SendResult, error) {
	var (
		errs       []error
		lastBroker string
	)
	for try := 0; try < tries; try++ {
		qs, err := queues(ctx)
		if err != nil {
			errs = append(errs, err)
			break
		}
		q := pick(qs, lastBroker)
		res, err := send(ctx, q)
		if err == nil {
			return res, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", q, err))
		if !retryable(err) || ctx.Err() != nil {
			break
		}
		if try+1 < tries {
			p.log.Debug("send failed; trying again", "queue", q, "err", err)
		}
		lastBroker = q.BrokerName
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, fmt.Errorf("client: send to %s failed %d times: %w", topic, len(errs), errors.Join(errs...))
}

// retryable reports whether a failed send may succeed on another queue:
// when the broker could not be reached or answered with a code that
// another broker may not give (spec §2.3), but not when the caller's
// context ended or the message itself was refused.
func retryable(err error) bool {
	var nr errNoRetry
	if errors.As(err, &nr) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, ErrInvalidMessage) || errors.Is(err, ErrMessageTooLarge) {
		return false
	}
	var be *BrokerError
	if errors.As(err, &be) {
		switch be.Code {
		case remoting.SystemError, remoting.SystemBusy, remoting.ServiceNotAvailable, remoting.NoPermission, remoting.TopicNotExist:
			return true
		}
		return false
	}
	return true
}

// selectQueue is the default choice of queue: the configured Selector, or
// round robin over the topic's queues that skips brokers the fault tracker
// holds out and lastBroker, the broker of a failed previous try. When every
// broker is held out it takes any other than lastBroker, and when there is
// no other, any.
func (p *Producer) selectQueue(msg *Message, qs []MessageQueue, lastBroker string) MessageQueue {
	if p.opts.Selector != nil {
		return p.opts.Selector.Select(msg, qs, nil)
	}
	n := uint32(len(qs))
	for range n {
		q := qs[p.rr.next(msg.Topic)%n]
		if q.BrokerName != lastBroker && p.fault.available(q.BrokerName) {
			return q
		}
	}
	for range n {
		q := qs[p.rr.next(msg.Topic)%n]
		if q.BrokerName != lastBroker {
			return q
		}
	}
	return qs[p.rr.next(msg.Topic)%n]
}

// writeQueues returns topic's writable queues, and notes the topic so its
// route is refreshed. A topic the name servers do not know borrows the
// route of TBW102, clamped to DefaultTopicQueueNums queues per broker, so
// the first send makes the broker create it (spec §4.3).
func (p *Producer) writeQueues(ctx context.Context, in *instance, topic string) ([]MessageQueue, error) {
	p.mu.Lock()
	p.mu.topics[topic] = struct{}{}
	p.mu.Unlock()
	if r := in.cachedRoute(topic); r != nil && len(r.writeQueues) > 0 {
		return r.writeQueues, nil
	}
	r, err := in.updateRoute(ctx, topic)
	if err == nil && len(r.writeQueues) > 0 {
		return r.writeQueues, nil
	}
	if err != nil && !errors.Is(err, ErrTopicNotExist) {
		var be *BrokerError
		if !errors.As(err, &be) {
			return nil, err
		}
	}
	rd, terr := in.fetchRoute(ctx, remoting.AutoCreateTopicKey)
	if terr != nil {
		if err == nil {
			return nil, fmt.Errorf("%w: no writable queue of %s", ErrNoQueue, topic)
		}
		return nil, fmt.Errorf("%w (nor is %s known: %v)", err, remoting.AutoCreateTopicKey, terr)
	}
	n := p.opts.DefaultTopicQueueNums
	for i := range rd.QueueDatas {
		if qd := &rd.QueueDatas[i]; qd.ReadQueueNums > n || qd.WriteQueueNums > n {
			qd.ReadQueueNums, qd.WriteQueueNums = min(qd.ReadQueueNums, n), min(qd.WriteQueueNums, n)
		}
	}
	r = in.storeRoute(topic, rd)
	if len(r.writeQueues) == 0 {
		return nil, fmt.Errorf("%w: no writable queue of %s (nor of %s)", ErrNoQueue, topic, remoting.AutoCreateTopicKey)
	}
	return r.writeQueues, nil
}

// outgoing is a prepared send: everything but the queue.
type outgoing struct {
	topic   string
	body    []byte
	sysFlag int32
	flag    int32
	props   string
	batch   bool
	msgID   string // UNIQ_KEY, or the batch's joined with ","
}

// prepare checks msgs and encodes them for sending; transactional marks a
// half message.
func (p *Producer) prepare(msgs []*Message, transactional bool) (*outgoing, error) {
	if len(msgs) == 0 {
		return nil, fmt.Errorf("%w: no message to send", ErrInvalidMessage)
	}
	for i, m := range msgs {
		if m == nil {
			return nil, fmt.Errorf("%w: message %d is nil", ErrInvalidMessage, i)
		}
		if err := p.check(m); err != nil {
			return nil, err
		}
		if m.Property(message.PropertyUniqKey) == "" {
			m.SetProperty(message.PropertyUniqKey, message.NewUniqID())
		}
	}
	if len(msgs) == 1 {
		return p.prepareOne(msgs[0], transactional)
	}
	return p.prepareBatch(msgs)
}

// check validates one message.
func (p *Producer) check(m *Message) error {
	if m.Topic == "" {
		return fmt.Errorf("%w: no topic", ErrInvalidMessage)
	}
	if err := remoting.ValidateTopicName(m.Topic); err != nil {
		return fmt.Errorf("%w: topic: %v", ErrInvalidMessage, err)
	}
	switch {
	case len(m.Body) == 0:
		return fmt.Errorf("%w: empty body (topic %s)", ErrInvalidMessage, m.Topic)
	case len(m.Body) > p.opts.MaxMessageSize:
		return fmt.Errorf("%w: body of %d bytes, the limit is %d (topic %s)", ErrMessageTooLarge, len(m.Body), p.opts.MaxMessageSize, m.Topic)
	}
	return nil
}

func (p *Producer) prepareOne(m *Message, transactional bool) (*outgoing, error) {
	o := &outgoing{topic: m.Topic, body: m.Body, flag: m.Flag, msgID: m.Property(message.PropertyUniqKey)}
	props := m.Properties
	if transactional {
		props = make(map[string]string, len(m.Properties)+2)
		for k, v := range m.Properties {
			props[k] = v
		}
		props[message.PropertyTransactionPrepared] = "true"
		props[message.PropertyProducerGroup] = p.opts.Group
		o.sysFlag |= message.SysFlagTxPrepared
	}
	enc := message.EncodeProperties(props)
	if len(enc) > message.MaxPropertiesLen {
		return nil, fmt.Errorf("%w: properties of %d bytes, the limit is %d", ErrInvalidMessage, len(enc), message.MaxPropertiesLen)
	}
	o.props = string(enc)
	if p.opts.CompressThreshold > 0 && len(m.Body) > p.opts.CompressThreshold {
		z, err := deflate(m.Body, p.opts.CompressLevel)
		if err != nil {
			return nil, fmt.Errorf("client: compressing a body: %w", err)
		}
		if len(z) < len(m.Body) {
			o.body = z
			o.sysFlag |= message.SysFlagCompressed
		}
	}
	return o, nil
}

func (p *Producer) prepareBatch(msgs []*Message) (*outgoing, error) {
	topic := msgs[0].Topic
	o := &outgoing{topic: topic, batch: true}
	ids := make([]string, 0, len(msgs))
	for i, m := range msgs {
		switch {
		case m.Topic != topic:
			return nil, fmt.Errorf("%w: batch message %d has topic %s, the first has %s; a batch goes to one topic", ErrInvalidMessage, i, m.Topic, topic)
		case m.Property(message.PropertyDelayLevel) != "" || m.Property(message.PropertyTimerDeliverMS) != "":
			return nil, fmt.Errorf("%w: batch message %d has a delay; batches cannot be delayed", ErrInvalidMessage, i)
		case m.Property(message.PropertyTransactionPrepared) != "":
			return nil, fmt.Errorf("%w: batch message %d is transactional; batches cannot be", ErrInvalidMessage, i)
		}
		var err error
		o.body, err = message.AppendBatchEntry(o.body, message.BatchEntry{Flag: m.Flag, Body: m.Body, Properties: message.EncodeProperties(m.Properties)})
		if err != nil {
			return nil, fmt.Errorf("%w: batch message %d: %v", ErrInvalidMessage, i, err)
		}
		ids = append(ids, m.Property(message.PropertyUniqKey))
	}
	if len(o.body) > p.opts.MaxMessageSize {
		return nil, fmt.Errorf("%w: batch of %d messages is %d bytes, the limit is %d (topic %s)", ErrMessageTooLarge, len(msgs), len(o.body), p.opts.MaxMessageSize, topic)
	}
	o.msgID = strings.Join(ids, ",")
	return o, nil
}

// request builds the SEND_MESSAGE, or for a batch SEND_BATCH_MESSAGE with
// the one-letter V2 header (spec §6.1, §6.2).
func (p *Producer) request(o *outgoing, q MessageQueue) *remoting.Command {
	h := remoting.SendHeader{
		ProducerGroup:         p.opts.Group,
		Topic:                 o.topic,
		DefaultTopic:          remoting.AutoCreateTopicKey,
		DefaultTopicQueueNums: int32(p.opts.DefaultTopicQueueNums),
		QueueID:               q.QueueID,
		BornTimestamp:         time.Now().UnixMilli(),
		BrokerName:            q.BrokerName,
	}
	if o.batch {
		h.Batch = true
		return remoting.NewRequest(remoting.SendBatchMessage, h.ExtFields(true), o.body)
	}
	h.SysFlag, h.Flag, h.Properties = o.sysFlag, o.flag, o.props
	return remoting.NewRequest(remoting.SendMessage, h.ExtFields(false), o.body)
}

// probeFaults asks each broker held out for a failed send, every
// faultProbeInterval, for the max offset of the queue that failed; one that
// answers (with anything) takes sends again. It runs until Shutdown.
func (p *Producer) probeFaults() {
	t := time.NewTicker(faultProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
		}
		in, err := p.instance()
		if err != nil {
			return
		}
		for _, q := range p.fault.toProbe() {
			addr, ok := in.masterAddr(q.BrokerName)
			if !ok {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), faultProbeInterval/2)
			_, err := in.invoke(ctx, addr, remoting.NewRequest(remoting.GetMaxOffset,
				map[string]string{"topic": q.Topic, "queueId": strconv.Itoa(int(q.QueueID))}, nil))
			cancel()
			if err == nil {
				p.log.Info("broker answers again; it takes sends", "broker", q.BrokerName, "addr", addr)
				p.fault.answered(q.BrokerName, q)
			}
		}
	}
}

// Recall cancels the delivery of a delayed message that still waits, by
// the RecallHandle of its SendResult, and returns its message id. It asks
// the broker the handle names. A message already delivered, or a handle
// that does not name a message of topic, is refused with a BrokerError.
func (p *Producer) Recall(ctx context.Context, topic, handle string) (string, error) {
	h, err := message.ParseRecallHandle(handle)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidMessage, err)
	}
	in, err := p.instance()
	if err != nil {
		return "", err
	}
	addr, err := in.masterAddrFor(ctx, h.Broker, topic)
	if err != nil {
		return "", err
	}
	resp, err := in.invoke(ctx, addr, remoting.NewRequest(remoting.RecallMessage, map[string]string{
		"producerGroup": p.opts.Group, "topic": topic, "recallHandle": handle}, nil))
	if err != nil {
		return "", fmt.Errorf("client: recall on %s (%s): %w", h.Broker, addr, err)
	}
	if resp.Code != remoting.Success {
		return "", brokerError(resp)
	}
	return resp.Get("msgId"), nil
}

// sendTo sends o to q's broker master once and records the latency with
// the fault tracker. A oneway send returns a nil result.
func (p *Producer) sendTo(ctx context.Context, in *instance, o *outgoing, q MessageQueue, oneway bool) (*SendResult, error) {
	addr, err := in.masterAddrFor(ctx, q.BrokerName, q.Topic)
	if err != nil {
		return nil, err
	}
	req := p.request(o, q)
	if oneway {
		return nil, in.rc.InvokeOneway(ctx, addr, req)
	}
	start := time.Now()
	resp, err := in.invoke(ctx, addr, req)
	// Like RocketMQ, only a failure to get an answer holds the broker
	// out as failed; an error answer counts with its latency.
	p.fault.record(q, time.Since(start), err != nil)
	if err != nil {
		return nil, fmt.Errorf("client: send to %s (%s): %w", q.BrokerName, addr, err)
	}
	return p.result(o, q, resp)
}

// result reads a send's answer.
func (p *Producer) result(o *outgoing, q MessageQueue, resp *remoting.Command) (*SendResult, error) {
	res := &SendResult{MsgID: o.msgID, Queue: q}
	switch resp.Code {
	case remoting.Success:
		res.Status = SendOK
	case remoting.FlushDiskTimeout:
		res.Status = SendFlushDiskTimeout
	case remoting.FlushSlaveTimeout:
		res.Status = SendFlushSlaveTimeout
	case remoting.SlaveNotAvailable:
		res.Status = SendSlaveNotAvailable
	default:
		return nil, brokerError(resp)
	}
	qid, err := resp.Int32Or("queueId", q.QueueID)
	if err != nil {
		return nil, err
	}
	res.Queue.QueueID = qid
	if res.QueueOffset, err = resp.Int64("queueOffset"); err != nil {
		return nil, fmt.Errorf("client: send answer: %w", err)
	}
	res.OffsetMsgID = resp.Get("msgId")
	res.TransactionID = resp.Get("transactionId")
	res.RegionID = resp.Get("MSG_REGION")
	res.RecallHandle = resp.Get("recallHandle")
	if res.RegionID == "" {
		res.RegionID = "DefaultRegion"
	}
	return res, nil
}
