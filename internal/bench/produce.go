package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// Values the producer sends that never change.
const (
	// benchTag is the TAGS property of every message.
	benchTag = "bench"
	// defaultTopicQueueNums is what the clients hard-code in every send
	// header, with remoting.AutoCreateTopicKey, for brokers that create
	// topics on first use.
	defaultTopicQueueNums = "4"
	// permReadWrite is the perm of the created topic (READ|WRITE).
	permReadWrite = "6"
)

// propsHead starts every message's properties; the UNIQ_KEY value and its
// terminator follow.
const propsHead = message.PropertyTags + "\x01" + benchTag + "\x02" + message.PropertyUniqKey + "\x01"

// Produce creates Options.Topic on the broker and sends messages to it
// until Duration has passed or Count messages have been sent, from
// Conns×InFlight concurrent requests, paced to Rate when it is set. It
// writes a line describing the run and then a progress line every Progress
// to out (which may be nil), and returns the summary for the caller to
// print.
//
// Errors of individual requests are counted in the summary, not returned.
// The error is ErrInvalidOptions, or a failure to set the run up (the
// broker cannot be reached or refuses the topic), in which case nothing was
// measured; or the context's error when ctx ended the run early, in which
// case the summary covers what was done until then.
func Produce(ctx context.Context, opts Options, out io.Writer) (Summary, error) {
	return produce(ctx, opts, out, newWallClock())
}

func produce(ctx context.Context, opts Options, out io.Writer, clk clock) (Summary, error) {
	opts = opts.withDefaults(false)
	if err := opts.validate(); err != nil {
		return Summary{}, err
	}
	if opts.Protocol == ProtocolGRPC {
		return produceGRPC(ctx, opts, out, clk)
	}
	// One worker per connection keeps its InFlight requests outstanding.
	s := newSession(ctx, opts, out, clk, opts.Conns, opts.Conns)
	defer s.close()
	if _, err := s.brokerCPU(); err != nil {
		return Summary{}, err
	}
	if err := createTopic(s); err != nil {
		return Summary{}, err
	}
	if err := warmUp(s); err != nil {
		return Summary{}, err
	}
	fmt.Fprintln(s.out, produceHeader(&opts))

	p := newProducer(s)
	s.run(func() {
		if opts.Rate > 0 {
			p.pacer = newPacer(clk, opts.Rate, s.start)
		}
	}, p.loop)
	return s.summary(), ctx.Err()
}

// createTopic creates or updates the topic with Queues read and write
// queues, as the admin tools do.
func createTopic(s *session) error {
	q := strconv.Itoa(s.opts.Queues)
	_, err := s.setup(s.clients[0], remoting.UpdateAndCreateTopic, map[string]string{
		"topic":           s.opts.Topic,
		"defaultTopic":    remoting.AutoCreateTopicKey,
		"readQueueNums":   q,
		"writeQueueNums":  q,
		"perm":            permReadWrite,
		"topicFilterType": "SINGLE_TAG",
		"topicSysFlag":    "0",
		"order":           "false",
	})
	return err
}

// warmUp connects every client before the clock starts, so no request of
// the run pays for a dial, by asking each for queue 0's max offset.
func warmUp(s *session) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for _, cl := range s.clients {
		wg.Go(func() {
			_, err := s.setup(cl, remoting.GetMaxOffset, map[string]string{"topic": s.opts.Topic, "queueId": "0"})
			if err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

func produceHeader(o *Options) string {
	rate := "unlimited"
	if o.Rate > 0 {
		rate = strconv.Itoa(o.Rate) + " msgs/s"
	}
	var until string
	switch {
	case o.Count > 0 && o.Duration > 0:
		until = fmt.Sprintf("%d messages or %v", o.Count, o.Duration)
	case o.Count > 0:
		until = fmt.Sprintf("%d messages", o.Count)
	default:
		until = o.Duration.String()
	}
	over := ""
	if o.Protocol == ProtocolGRPC {
		over = " over gRPC"
	}
	return fmt.Sprintf("produce to %s%s topic %s (%d queues): %d conns × %d in flight, %d-byte messages, batch %d, rate %s, for %s",
		o.Broker, over, o.Topic, o.Queues, o.Conns, o.InFlight, o.Size, o.Batch, rate, until)
}

// producer is the shared state of a Produce run's workers.
type producer struct {
	s        *session
	pacer    *pacer   // nil when Rate is 0
	payload  []byte   // the body of every message; read-only once built
	queueIDs []string // decimal text of each queue id
	code     int16    // SendMessage or SendBatchMessage

	next    atomic.Uint64 // round-robin queue counter
	claimed atomic.Int64  // messages handed out, for Count
	stopped atomic.Bool   // set when Count or Duration is reached
}

func newProducer(s *session) *producer {
	p := &producer{s: s, code: remoting.SendMessage}
	if s.opts.Batch > 1 {
		p.code = remoting.SendBatchMessage
	}
	p.payload = make([]byte, s.opts.Size)
	for i := range p.payload {
		p.payload[i] = 'a' + byte(i%26)
	}
	for q := range s.opts.Queues {
		p.queueIDs = append(p.queueIDs, strconv.Itoa(q))
	}
	return p
}

// claim returns how many messages the next request carries: Batch, fewer
// for the last one under Count, or 0 when the run is over.
func (p *producer) claim() int {
	if p.stopped.Load() || p.s.ctx.Err() != nil {
		return 0
	}
	n := p.s.opts.Batch
	if limit := p.s.opts.Count; limit > 0 {
		if over := p.claimed.Add(int64(n)) - limit; over > 0 {
			n -= int(min(over, int64(n)))
			if n == 0 {
				p.stopped.Store(true)
			}
		}
	}
	return n
}

// wait holds a request of n messages until the pacer lets it go. It
// reports false when the run is over: the pacer's slot for it, or the
// clock, is past the deadline, or the context ended.
func (p *producer) wait(n int) bool {
	s := p.s
	if p.pacer == nil {
		if s.pastDeadline(s.clk.now()) {
			p.stopped.Store(true)
			return false
		}
		return true
	}
	at := p.pacer.reserve(n)
	if s.pastDeadline(at) {
		p.stopped.Store(true)
		return false
	}
	return s.clk.sleepUntil(s.ctx, at) == nil
}

// sendState is one worker's reusable request parts.
type sendState struct {
	req  remoting.Command
	done func(*remoting.Command, error) // st's InvokeAsync callback
	// n and sentAt are the messages and clock time of the request in
	// flight; failed says it ended without a response, other than by
	// timing out, so the sender pauses before the next.
	n      int
	sentAt time.Duration
	failed bool
	// ext holds the extFields as key, value pairs (Command.SetFields), in
	// the order the Go client's header struct lists them; build rewrites
	// the values at the indices below.
	ext                       []string
	queueID, born, properties int
	props                     []byte // properties of the message being built
	body                      []byte // batch body; dropped when a call fails without a response
	// bornMS and bornText cache the bornTimestamp text for one millisecond.
	bornMS   int64
	bornText string
}

// bornTimestamp returns the current wall time in ms as text, formatting it
// only when the millisecond changes.
func (st *sendState) bornTimestamp() string {
	if ms := time.Now().UnixMilli(); ms != st.bornMS {
		st.bornMS, st.bornText = ms, strconv.FormatInt(ms, 10)
	}
	return st.bornText
}

// newProps sets st.props to a new message's properties.
func (st *sendState) newProps() {
	st.props = append(st.props[:0], propsHead...)
	st.props = append(st.props, message.NewUniqID()...)
	st.props = append(st.props, 0x02)
}

// newSendState returns a worker's send state with the header fields that
// never change filled in.
func (p *producer) newSendState() *sendState {
	o := &p.s.opts
	if p.code == remoting.SendMessage {
		return &sendState{
			ext: []string{
				"producerGroup", o.Group,
				"topic", o.Topic,
				"defaultTopic", remoting.AutoCreateTopicKey,
				"defaultTopicQueueNums", defaultTopicQueueNums,
				"queueId", "",
				"sysFlag", "0",
				"bornTimestamp", "",
				"flag", "0",
				"properties", "",
				"reconsumeTimes", "0",
				"unitMode", "false",
				"maxReconsumeTimes", "0",
				"batch", "false",
			},
			queueID: 9, born: 13, properties: 17,
		}
	}
	// SEND_BATCH_MESSAGE takes the one-letter V2 header.
	return &sendState{
		ext: []string{
			"a", o.Group,
			"b", o.Topic,
			"c", remoting.AutoCreateTopicKey,
			"d", defaultTopicQueueNums,
			"e", "", // queueId
			"f", "0",
			"g", "", // bornTimestamp
			"h", "0",
			"i", "",
			"j", "0",
			"k", "false",
			"l", "0",
			"m", "true",
		},
		queueID: 9, born: 13, properties: -1,
	}
}

// build prepares st.req for a request of n messages to queue q.
func (p *producer) build(st *sendState, n, q int) {
	st.ext[st.queueID] = p.queueIDs[q]
	st.ext[st.born] = st.bornTimestamp()
	if p.code == remoting.SendMessage {
		st.newProps()
		st.ext[st.properties] = string(st.props)
		st.req.SetFields(st.ext...)
		st.req.Body = p.payload
		return
	}
	body := st.body[:0]
	for range n {
		st.newProps()
		// The properties are far below the format's limit, so this
		// cannot fail.
		body, _ = message.AppendBatchEntry(body, message.BatchEntry{Body: p.payload, Properties: st.props})
	}
	st.body = body
	st.req.SetFields(st.ext...)
	st.req.Body = body
}

// loop is one connection's run: it keeps up to InFlight requests
// outstanding, each built in a sendState of its own that comes back to
// free when its request is answered or has failed. It returns once the run
// is over and every request it sent has ended.
func (p *producer) loop(w *worker) {
	s := p.s
	free := make(chan *sendState, s.opts.InFlight)
	for range s.opts.InFlight {
		st := p.newSendState()
		st.req = remoting.Command{Code: p.code, Language: remoting.LanguageGo, Version: remoting.DefaultVersion}
		st.done = func(resp *remoting.Command, err error) { p.done(w, st, free, resp, err) }
		free <- st
	}
	defer func() {
		for range s.opts.InFlight {
			<-free
		}
	}()
	callCtx := context.WithoutCancel(s.ctx)
	for {
		var st *sendState
		select {
		case st = <-free:
		case <-s.ctx.Done():
			return
		}
		if st.failed {
			st.failed = false
			if !s.backoff() {
				free <- st
				return
			}
		}
		n := p.claim()
		if n == 0 || !p.wait(n) {
			free <- st
			return
		}
		q := int(p.next.Add(1)-1) % len(p.queueIDs)
		p.build(st, n, q)
		st.n, st.sentAt = n, s.clk.now()
		// The loop watches s.ctx itself; requests already sent end with
		// their response or Timeout, without a context hook per request.
		err := w.client.InvokeAsync(callCtx, s.opts.Broker, &st.req, s.opts.Timeout, st.done)
		if err == nil {
			continue
		}
		// The connection may still hold the body it did not send.
		st.body = nil
		free <- st
		if s.ctx.Err() != nil {
			return
		}
		s.requests.Add(1)
		s.failed(nil, err)
		if !s.backoff() {
			return
		}
	}
}

// done ends st's request with its response or error, on the connection's
// reader goroutine (or its timer's), and gives st back to free. It must not
// block: free has room for every sendState of the connection.
func (p *producer) done(w *worker, st *sendState, free chan<- *sendState, resp *remoting.Command, err error) {
	s := p.s
	lat := s.clk.now() - st.sentAt
	switch {
	case err != nil && s.ctx.Err() != nil:
		// The run was stopped; this request does not count.
	case err != nil:
		s.requests.Add(1)
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w: %s unanswered after %v", ErrTimeout, remoting.RequestCode(p.code), s.opts.Timeout)
		} else {
			st.failed = true // the sender pauses before using st again
		}
		s.failed(nil, err)
		// The connection may still hold the body it did not send.
		st.body = nil
	case resp.Code != remoting.Success:
		s.requests.Add(1)
		w.hist.record(lat)
		s.failed(resp, nil)
	default:
		s.requests.Add(1)
		w.hist.record(lat)
		s.messages.Add(int64(st.n))
		s.bytes.Add(int64(st.n) * int64(s.opts.Size))
	}
	free <- st
}
