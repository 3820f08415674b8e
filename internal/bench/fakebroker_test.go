package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// fakeStoreHost is the address the fake writes into records and msgIds.
var fakeStoreHost = netip.MustParseAddrPort("127.0.0.1:10911")

// fakeBroker stands in for the broker over a real remoting.Server on a
// loopback port. It serves what the bench sends (17, 10, 320, 30, 31, 11),
// checks each header as strictly as a broker would, answering
// MESSAGE_ILLEGAL and noting the problem when one is wrong, and keeps the
// records it is sent in memory, per queue, for pulls to return.
type fakeBroker struct {
	addr string
	// keep stores sent messages; benchmarks turn it off to save memory.
	keep bool

	// sendCode, when not Success, is the answer to every send.
	sendCode atomic.Int32
	// holdSends makes sends go unanswered.
	holdSends atomic.Bool
	// pullCap, when positive, caps the records of one pull response below
	// maxMsgNums, as a broker's byte limit does.
	pullCap atomic.Int32
	// maxExtra is added to every GET_MAX_OFFSET answer, so the queue claims
	// more than it holds.
	maxExtra atomic.Int64
	// onSend, if set, runs for every send request (before the answer). It
	// is atomic because a test sets it after the fake starts serving, and
	// the race detector sees no order through the client's writev.
	onSend atomic.Pointer[func()]

	counts sync.Map // request code (int16) → *atomic.Int64

	mu struct {
		sync.Mutex
		topic    string
		queues   int
		log      map[int32]*fakeQueue
		problems []string
		commit   int64 // next commit-log offset
	}
}

// fakeQueue holds one queue's records; recs[i] has offset min+i.
type fakeQueue struct {
	min  int64
	recs [][]byte
}

func (q *fakeQueue) max() int64 { return q.min + int64(len(q.recs)) }

// startFake serves a fake broker on 127.0.0.1:0 until the test ends.
func startFake(t testing.TB, keep bool) *fakeBroker {
	t.Helper()
	fb := &fakeBroker{keep: keep}
	fb.mu.log = make(map[int32]*fakeQueue)
	srv := remoting.NewServer(remoting.ServerOptions{})
	srv.Handle(remoting.UpdateAndCreateTopic, fb.counted(fb.createTopic))
	srv.Handle(remoting.SendMessage, fb.counted(fb.send))
	srv.Handle(remoting.SendBatchMessage, fb.counted(fb.sendBatch))
	srv.Handle(remoting.GetMaxOffset, fb.counted(fb.offset))
	srv.Handle(remoting.GetMinOffset, fb.counted(fb.offset))
	srv.Handle(remoting.PullMessage, fb.counted(fb.pull))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("fake broker shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, remoting.ErrServerClosed) {
			t.Errorf("fake broker Serve: %v", err)
		}
		for _, p := range fb.problems() {
			t.Errorf("fake broker saw: %s", p)
		}
	})
	fb.addr = ln.Addr().String()
	return fb
}

func (fb *fakeBroker) counted(h remoting.Handler) remoting.Handler {
	return func(c *remoting.Conn, req *remoting.Command) *remoting.Command {
		n, _ := fb.counts.LoadOrStore(req.Code, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		return h(c, req)
	}
}

// count returns how many requests with code arrived.
func (fb *fakeBroker) count(code int16) int64 {
	if n, ok := fb.counts.Load(code); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

func (fb *fakeBroker) problems() []string {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	return append([]string(nil), fb.mu.problems...)
}

// illegal notes a header problem and answers MESSAGE_ILLEGAL.
func (fb *fakeBroker) illegal(req *remoting.Command, format string, args ...any) *remoting.Command {
	msg := fmt.Sprintf("%s: ", remoting.RequestCode(req.Code)) + fmt.Sprintf(format, args...)
	fb.mu.Lock()
	if len(fb.mu.problems) < 10 {
		fb.mu.problems = append(fb.mu.problems, msg)
	}
	fb.mu.Unlock()
	return remoting.NewResponse(req, remoting.MessageIllegal, msg)
}

// want checks that req's extFields hold exactly the given values; a value
// of "?" accepts anything but absence.
func (fb *fakeBroker) want(req *remoting.Command, fields map[string]string) error {
	for k, v := range fields {
		got, ok := req.ExtFields[k]
		if !ok {
			return fmt.Errorf("missing %q", k)
		}
		if v != "?" && got != v {
			return fmt.Errorf("%q is %q, want %q", k, got, v)
		}
	}
	if len(req.ExtFields) != len(fields) {
		return fmt.Errorf("%d fields, want %d: %v", len(req.ExtFields), len(fields), req.ExtFields)
	}
	return nil
}

func (fb *fakeBroker) createTopic(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	if err := fb.want(req, map[string]string{"topic": "?", "defaultTopic": "TBW102", "readQueueNums": "?", "writeQueueNums": "?",
		"perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"}); err != nil {
		return fb.illegal(req, "%v", err)
	}
	n, err := req.Int32("writeQueueNums")
	if err != nil || n <= 0 || req.Get("readQueueNums") != req.Get("writeQueueNums") {
		return fb.illegal(req, "queue counts %v", req.ExtFields)
	}
	fb.setTopic(req.Get("topic"), int(n))
	return remoting.NewResponse(req, remoting.Success, "")
}

func (fb *fakeBroker) setTopic(topic string, queues int) {
	fb.mu.Lock()
	fb.mu.topic, fb.mu.queues = topic, queues
	fb.mu.Unlock()
}

// queueOf checks topic and queue id against the created topic.
func (fb *fakeBroker) queueOf(topic, queueID string) (int32, error) {
	q, err := strconv.Atoi(queueID)
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if topic != fb.mu.topic {
		return 0, fmt.Errorf("topic %q does not exist", topic)
	}
	if err != nil || q < 0 || q >= fb.mu.queues {
		return 0, fmt.Errorf("queue %q out of range", queueID)
	}
	return int32(q), nil
}

// store appends one message to queue q and returns its queue offset and
// commit-log offset.
func (fb *fakeBroker) store(topic string, q int32, born int64, body []byte, props message.Properties) (int64, int64) {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	lq := fb.mu.log[q]
	if lq == nil {
		lq = &fakeQueue{}
		fb.mu.log[q] = lq
	}
	m := &message.Message{
		QueueID: q, QueueOffset: lq.max(), CommitLogOffset: fb.mu.commit, BornTimestamp: born,
		BornHost: netip.MustParseAddrPort("127.0.0.1:40000"), StoreTimestamp: time.Now().UnixMilli(),
		StoreHost: fakeStoreHost, Body: body, Topic: topic, Properties: props,
	}
	fb.mu.commit += int64(m.RecordLen())
	if fb.keep {
		rec, err := message.AppendRecord(nil, m)
		if err != nil {
			panic(err)
		}
		lq.recs = append(lq.recs, rec)
	} else {
		lq.min++ // the offset advances; nothing is kept
	}
	return m.QueueOffset, m.CommitLogOffset
}

// checkProps requires UNIQ_KEY and TAGS in a message's properties.
func checkProps(p message.Properties) error {
	if id := p.Get(message.PropertyUniqKey); len(id) != 32 {
		return fmt.Errorf("UNIQ_KEY %q is not 32 characters", id)
	}
	if p.Tags() == "" {
		return fmt.Errorf("no TAGS in %q", p)
	}
	return nil
}

// setOnSend makes f run for every send request from now on.
func (fb *fakeBroker) setOnSend(f func()) { fb.onSend.Store(&f) }

func (fb *fakeBroker) sendAnswer(req *remoting.Command) *remoting.Command {
	if f := fb.onSend.Load(); f != nil {
		(*f)()
	}
	if fb.holdSends.Load() {
		return nil
	}
	if code := fb.sendCode.Load(); code != remoting.Success {
		return remoting.NewResponse(req, int16(code), "fake failure")
	}
	return nil
}

func (fb *fakeBroker) send(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	if err := fb.want(req, map[string]string{"producerGroup": "?", "topic": "?", "defaultTopic": "TBW102",
		"defaultTopicQueueNums": "4", "queueId": "?", "sysFlag": "0", "bornTimestamp": "?", "flag": "0",
		"properties": "?", "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "0", "batch": "false"}); err != nil {
		return fb.illegal(req, "%v", err)
	}
	if resp := fb.sendAnswer(req); resp != nil || fb.holdSends.Load() {
		return resp
	}
	q, err := fb.queueOf(req.Get("topic"), req.Get("queueId"))
	if err != nil {
		return fb.illegal(req, "%v", err)
	}
	born, err := req.Int64("bornTimestamp")
	if err != nil {
		return fb.illegal(req, "%v", err)
	}
	props := message.Properties(req.Get("properties"))
	if err := checkProps(props); err != nil {
		return fb.illegal(req, "%v", err)
	}
	if len(req.Body) == 0 {
		return fb.illegal(req, "empty body")
	}
	qoff, coff := fb.store(req.Get("topic"), q, born, req.Body, props)
	return sendResponse(req, q, qoff, message.OffsetMsgID(fakeStoreHost, coff))
}

func sendResponse(req *remoting.Command, q int32, qoff int64, msgID string) *remoting.Command {
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Set("msgId", msgID)
	resp.SetInt32("queueId", q)
	resp.SetInt64("queueOffset", qoff)
	return resp
}

func (fb *fakeBroker) sendBatch(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	if err := fb.want(req, map[string]string{"a": "?", "b": "?", "c": "TBW102", "d": "4", "e": "?", "f": "0",
		"g": "?", "h": "0", "i": "", "j": "0", "k": "false", "l": "0", "m": "true"}); err != nil {
		return fb.illegal(req, "%v", err)
	}
	if resp := fb.sendAnswer(req); resp != nil || fb.holdSends.Load() {
		return resp
	}
	q, err := fb.queueOf(req.Get("b"), req.Get("e"))
	if err != nil {
		return fb.illegal(req, "%v", err)
	}
	born, err := req.Int64("g")
	if err != nil {
		return fb.illegal(req, "%v", err)
	}
	entries, err := message.DecodeBatch(req.Body)
	if err != nil {
		return fb.illegal(req, "%v", err)
	}
	first := int64(-1)
	var ids []byte
	for _, e := range entries {
		if err := checkProps(e.Properties); err != nil {
			return fb.illegal(req, "%v", err)
		}
		qoff, coff := fb.store(req.Get("b"), q, born, e.Body, e.Properties)
		if first < 0 {
			first = qoff
		}
		if len(ids) > 0 {
			ids = append(ids, ',')
		}
		ids = append(ids, message.OffsetMsgID(fakeStoreHost, coff)...)
	}
	return sendResponse(req, q, first, string(ids))
}

func (fb *fakeBroker) offset(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	if err := fb.want(req, map[string]string{"topic": "?", "queueId": "?"}); err != nil {
		return fb.illegal(req, "%v", err)
	}
	q, err := fb.queueOf(req.Get("topic"), req.Get("queueId"))
	if err != nil {
		return remoting.NewResponse(req, remoting.TopicNotExist, err.Error())
	}
	fb.mu.Lock()
	var lo, hi int64
	if lq := fb.mu.log[q]; lq != nil {
		lo, hi = lq.min, lq.max()
	}
	fb.mu.Unlock()
	resp := remoting.NewResponse(req, remoting.Success, "")
	if req.Code == remoting.GetMinOffset {
		resp.SetInt64("offset", lo)
	} else {
		resp.SetInt64("offset", hi+fb.maxExtra.Load())
	}
	return resp
}

func (fb *fakeBroker) pull(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	if err := fb.want(req, map[string]string{"consumerGroup": "?", "topic": "?", "queueId": "?", "queueOffset": "?",
		"maxMsgNums": "?", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "?", "subscription": "*",
		"subVersion": "0", "expressionType": "TAG"}); err != nil {
		return fb.illegal(req, "%v", err)
	}
	q, err := fb.queueOf(req.Get("topic"), req.Get("queueId"))
	if err != nil {
		return remoting.NewResponse(req, remoting.TopicNotExist, err.Error())
	}
	o, err1 := req.Int64("queueOffset")
	n, err2 := req.Int64("maxMsgNums")
	if err := errors.Join(err1, err2); err != nil || n <= 0 {
		return fb.illegal(req, "offset or count: %v", req.ExtFields)
	}
	if capN := int64(fb.pullCap.Load()); capN > 0 {
		n = min(n, capN)
	}
	fb.mu.Lock()
	lq := fb.mu.log[q]
	if lq == nil {
		lq = &fakeQueue{}
	}
	lo, hi := lq.min, lq.max()
	var body []byte
	if o >= lo && o < hi {
		for _, r := range lq.recs[o-lo : min(o-lo+n, hi-lo)] {
			body = append(body, r...)
		}
	}
	fb.mu.Unlock()

	var resp *remoting.Command
	next := o
	switch {
	case o == hi:
		resp = remoting.NewResponse(req, remoting.PullNotFound, "")
	case o < lo:
		resp, next = remoting.NewResponse(req, remoting.PullOffsetMoved, ""), lo
	case o > hi:
		resp, next = remoting.NewResponse(req, remoting.PullOffsetMoved, ""), hi
	default:
		resp = remoting.NewResponse(req, remoting.Success, "")
		resp.Body = body
		next = min(o+n, hi)
	}
	resp.SetInt64("nextBeginOffset", next)
	resp.SetInt64("minOffset", lo)
	resp.SetInt64("maxOffset", hi)
	resp.Set("suggestWhichBrokerId", "0")
	return resp
}

// seed creates topic with queues queues and stores n[q] messages of size
// bytes in queue q, the first skip[q] of which are then dropped, as
// retention would, so queue q's min offset is skip[q].
func (fb *fakeBroker) seed(topic string, queues int, n, skip []int, size int) {
	fb.setTopic(topic, queues)
	body := make([]byte, size)
	for q := range queues {
		for range n[q] {
			props := message.EncodeProperties(map[string]string{message.PropertyUniqKey: message.NewUniqID(), message.PropertyTags: "seed"})
			fb.store(topic, int32(q), time.Now().UnixMilli(), body, props)
		}
		fb.mu.Lock()
		if lq := fb.mu.log[int32(q)]; lq != nil && skip[q] > 0 {
			lq.recs = lq.recs[skip[q]:]
			lq.min += int64(skip[q])
		}
		fb.mu.Unlock()
	}
}

// stored returns how many messages queue q holds.
func (fb *fakeBroker) stored(q int32) int {
	fb.mu.Lock()
	defer fb.mu.Unlock()
	if lq := fb.mu.log[q]; lq != nil {
		return len(lq.recs)
	}
	return 0
}
