package sdk

import (
	"bytes"
	"errors"
	"fmt"
	"maps"

	"github.com/rmq-go/rmq/sdk/abi"
)

// TestMessage describes a message for a FilterTest. Tags and Keys are also
// added to the properties (as TAGS and KEYS) unless Properties sets them.
type TestMessage struct {
	Topic          string
	Tags           string
	Keys           string
	Properties     map[string]string
	Body           []byte
	QueueID        int32
	QueueOffset    int64
	BornTimestamp  int64
	StoreTimestamp int64
	ReconsumeTimes int32
}

// FilterTest is a self-test of the filter: Message must match Expression
// exactly when Match is true.
type FilterTest struct {
	Expression string
	Message    TestMessage
	Match      bool
}

// AllocateTest is a self-test of the allocator: Request must yield Want, in
// that order.
type AllocateTest struct {
	Request AllocateRequest
	Want    []int
}

// TestHalfMessage describes a half message for a TxnTest.
type TestHalfMessage struct {
	ProducerGroup  string
	Topic          string
	MsgID          string
	Properties     map[string]string
	CheckTimes     int32
	BornTimestamp  int64
	StoreTimestamp int64
}

// TxnTest is a self-test of the transaction-check policy: checking Message
// at NowMs must yield Want.
type TxnTest struct {
	NowMs   int64
	Message TestHalfMessage
	Want    Decision
}

// TransformTest is a self-test of the transform (ABI v1.3): what it must
// make of Message, whose Topic, Tags, Keys, Properties and Body are used.
// Name identifies the test in the broker's error when it fails.
type TransformTest struct {
	Name    string
	Message TestMessage
	Want    TransformWant
}

// TransformWant is the outcome a TransformTest expects; the zero value
// means the message is stored as it was sent. The broker compares
// outcomes: properties as a set of pairs, in any order, and a change that
// leaves everything as sent counts as passing it.
type TransformWant struct {
	// Reject: the transform must reject the message, with a reason that
	// contains Reason. The fields below are then unused.
	Reject bool
	Reason string

	// Topic is the topic the message must go to ("": the one it was sent
	// to).
	Topic string
	// Properties, when not nil, are all the properties the message must
	// have afterwards (TAGS and KEYS among them); nil: as sent.
	Properties map[string]string
	// Tags and Keys, when not empty, are the TAGS and KEYS the message must
	// have afterwards, over Properties (or the properties sent).
	Tags, Keys string
	// Body, when not nil, is the body the message must have afterwards;
	// nil: as sent.
	Body []byte
}

// AddFilterTest registers a self-test vector for the filter. The broker
// replays every vector of a newly loaded or reloaded module before it serves
// traffic, and refuses the module if one fails. Call it from an init
// function or from Init (vectors may depend on the config; the tests an
// Init adds replace those a previous Init added, as when a native test
// calls InitForTest with another config).
func AddFilterTest(t FilterTest) { state.filterTests = append(state.filterTests, t) }

// AddAllocateTest registers a self-test vector for the allocator.
func AddAllocateTest(t AllocateTest) { state.allocateTests = append(state.allocateTests, t) }

// AddTxnTest registers a self-test vector for the transaction-check policy.
func AddTxnTest(t TxnTest) { state.txnTests = append(state.txnTests, t) }

// AddTransformTest registers a self-test vector for the transform. The
// broker replays it on every load and reload, as it does filter tests,
// and refuses the module naming the test if the transform's outcome
// differs. Modules with transform tests need a broker of ABI v1.3 or
// later.
func AddTransformTest(t TransformTest) { state.transformTests = append(state.transformTests, t) }

// result returns the expectation w encodes for a test of message m: nil
// when the message must pass as sent.
func (w *TransformWant) result(m *TestMessage) *abi.TransformResult {
	if w.Reject {
		return &abi.TransformResult{Action: abi.TransformReject, Reason: []byte(w.Reason)}
	}
	r := &abi.TransformResult{Action: abi.TransformChange}
	if w.Topic != "" {
		r.Topic = []byte(w.Topic)
	}
	if w.Properties != nil || w.Tags != "" || w.Keys != "" {
		base := w.Properties
		if base == nil {
			base = sentProperties(m)
		}
		r.Properties = append([]byte{}, encodeProperties(base, w.Tags, w.Keys, true)...)
	}
	if w.Body != nil {
		r.Body = w.Body
	}
	if r.Topic == nil && r.Properties == nil && r.Body == nil {
		return nil
	}
	return r
}

// sentProperties returns the properties a test message is sent with.
func sentProperties(m *TestMessage) map[string]string {
	all := make(map[string]string, len(m.Properties)+2)
	Properties(encodeProperties(m.Properties, m.Tags, m.Keys, false)).Each(func(k, v string) bool {
		all[k] = v
		return true
	})
	return all
}

// encodeProperties encodes m as the broker stores it with TAGS and KEYS
// added: under m's own unless override, over them if it is set.
func encodeProperties(m map[string]string, tags, keys string, override bool) []byte {
	all := make(map[string]string, len(m)+2)
	if override {
		maps.Copy(all, m)
	}
	if tags != "" {
		all["TAGS"] = tags
	}
	if keys != "" {
		all["KEYS"] = keys
	}
	if !override {
		maps.Copy(all, m)
	}
	return encodePropertyMap(all)
}

// vectors encodes every registered test as the call the host would make.
func vectors() ([]abi.Vector, error) {
	var vs []abi.Vector
	for _, t := range state.filterTests {
		m := t.Message
		props := encodeProperties(m.Properties, m.Tags, m.Keys, false)
		pm := Properties(props)
		r := abi.FilterRecord{
			QueueID:        m.QueueID,
			QueueOffset:    m.QueueOffset,
			BornTimestamp:  m.BornTimestamp,
			StoreTimestamp: m.StoreTimestamp,
			ReconsumeTimes: m.ReconsumeTimes,
			Topic:          []byte(m.Topic),
			Tags:           []byte(pm.Get("TAGS")),
			Keys:           []byte(pm.Get("KEYS")),
			Properties:     props,
		}
		if filterBody() {
			r.Body, r.HasBody = m.Body, true
		}
		if filterValues() {
			if c := matcher([]byte(t.Expression)); c.values {
				r.Properties = resolveValues(nil, props, c.names)
			}
		}
		if r.EncodedLen() < 0 {
			return nil, fmt.Errorf("filter test %q: message too large", t.Expression)
		}
		want := byte(abi.FilterNoMatch)
		if t.Match {
			want = abi.FilterMatch
		}
		in := abi.AppendFilterRecord(abi.AppendFilterHeader(nil, t.Expression), &r)
		vs = append(vs, abi.Vector{Kind: abi.KindFilter, Count: 1, In: in, Out: []byte{want}})
	}
	for _, t := range state.allocateTests {
		in, err := abi.AppendAllocateRequest(nil, &t.Request)
		if err != nil {
			return nil, fmt.Errorf("allocate test: %w", err)
		}
		var out []byte
		for _, i := range t.Want {
			out = abi.AppendIndex(out, uint32(i))
		}
		vs = append(vs, abi.Vector{Kind: abi.KindAllocate, In: in, Out: out})
	}
	for _, t := range state.txnTests {
		m := t.Message
		h := abi.HalfMessage{
			CheckTimes:     m.CheckTimes,
			BornTimestamp:  m.BornTimestamp,
			StoreTimestamp: m.StoreTimestamp,
			ProducerGroup:  []byte(m.ProducerGroup),
			Topic:          []byte(m.Topic),
			MsgID:          []byte(m.MsgID),
			Properties:     encodeProperties(m.Properties, "", "", false),
		}
		if h.EncodedLen() < 0 {
			return nil, fmt.Errorf("txn test %q: message too large", m.MsgID)
		}
		in := abi.AppendHalfMessage(abi.AppendTxnHeader(nil, t.NowMs), &h)
		out := make([]byte, abi.TxnResultLen)
		abi.PutTxnResult(out, 0, abi.TxnAction(t.Want.Action), waitMs(t.Want.Wait))
		vs = append(vs, abi.Vector{Kind: abi.KindTxnCheck, Count: 1, In: in, Out: out})
	}
	for i, t := range state.transformTests {
		m := t.Message
		rec := abi.TransformRecord{Topic: []byte(m.Topic), Properties: encodeProperties(m.Properties, m.Tags, m.Keys, false), Body: m.Body}
		if rec.EncodedLen() < 0 {
			return nil, fmt.Errorf("transform test %s: message too large", transformTestName(i, t.Name))
		}
		e := abi.TransformExpectation{Name: transformTestName(i, t.Name), Result: t.Want.result(&m)}
		vs = append(vs, abi.Vector{Kind: abi.KindTransform, In: abi.AppendTransformRecord(nil, &rec), Out: abi.AppendTransformExpectation(nil, &e)})
	}
	return vs, nil
}

// resolveValues appends the values of names in props as the broker
// resolves them for a ValueFilter (abi.FlagFilterValues). A value too
// long for the layout makes the field too long for a record too, which
// the caller reports.
func resolveValues(dst, props []byte, names []string) []byte {
	for _, k := range names {
		v, ok := lookupProperty(props, k)
		var err error
		if dst, err = abi.AppendFilterValue(dst, v, ok); err != nil {
			dst = append(append(dst, 0xFE, 0xFF), v...)
		}
	}
	return dst
}

// transformTestName is the name a transform test is reported by: its own,
// or its position among the transform tests.
func transformTestName(i int, name string) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("#%d", i+1)
}

// selfTests is broker_selftest. A test that cannot be encoded yields an
// empty blob and a log line; the host then finds no vectors.
func selfTests() []byte {
	vs, err := vectors()
	if err != nil {
		Log(LevelError, "self-test vectors: "+err.Error())
		vs = nil
	}
	b := abi.AppendVectorCount(state.tests[:0], len(vs))
	for i := range vs {
		b = abi.AppendVector(b, &vs[i])
	}
	state.tests = b
	return b
}

// CheckSelfTests runs every registered self-test through the same code path
// the broker uses, in the current process, and reports each failure. Plugin
// authors call it from a native go test; the module must have run Init
// first if its tests depend on the config (see InitForTest).
func CheckSelfTests() error {
	vs, err := vectors()
	if err != nil {
		return err
	}
	var errs []error
	for i, v := range vs {
		if v.Kind == abi.KindTransform {
			if err := replayTransform(v); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		got, err := replay(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("self-test %d (kind %d): %w", i, v.Kind, err))
		} else if !bytes.Equal(got, v.Out) {
			errs = append(errs, fmt.Errorf("self-test %d (kind %d): output %x, want %x", i, v.Kind, got, v.Out))
		}
	}
	return errors.Join(errs...)
}

// InitForTest passes config to the registered kinds' Init methods, as
// broker_init does in the broker, so native tests can exercise the plugin.
func InitForTest(config []byte) error {
	buffer(abi.MaxErrorLen + 4)
	if s := runInit(config); s != abi.StatusOK {
		return fmt.Errorf("init: %v: %s", s, abi.ReadError(state.buf))
	}
	return nil
}

// replay runs one vector against the registered kinds.
func replay(v abi.Vector) ([]byte, error) {
	buf := buffer(uint32(abi.OutOffset(len(v.In)) + len(v.Out) + abi.MaxErrorLen + 4))
	in := buf[:copy(buf, v.In)]
	var (
		out []byte
		s   abi.Status
	)
	switch v.Kind {
	case abi.KindFilter:
		out = buf[abi.OutOffset(len(in)):][:v.Count]
		clear(out)
		s = runFilter(in, v.Count, out)
	case abi.KindTxnCheck:
		out = buf[abi.OutOffset(len(in)):][:v.Count*abi.TxnResultLen]
		clear(out)
		s = runTxnCheck(in, v.Count, out)
	case abi.KindAllocate:
		out, s = runAllocate(in)
	default:
		return nil, fmt.Errorf("unknown kind %d", v.Kind)
	}
	if s != abi.StatusOK {
		return nil, fmt.Errorf("%v: %s", s, abi.ReadError(state.buf))
	}
	return out, nil
}

// replayTransform runs one transform vector and checks its outcome as the
// broker does.
func replayTransform(v abi.Vector) error {
	e, err := abi.ReadTransformExpectation(v.Out)
	if err != nil {
		return fmt.Errorf("transform self-test: %w", err)
	}
	var rec abi.TransformRecord
	if err := abi.ReadTransformRecord(v.In, &rec); err != nil {
		return fmt.Errorf("transform self-test %q: %w", e.Name, err)
	}
	buffer(uint32(len(v.In) + abi.MaxErrorLen + 4))
	out, s := runTransform(v.In)
	if s != abi.StatusOK {
		return fmt.Errorf("transform self-test %q: %v: %s", e.Name, s, abi.ReadError(state.buf))
	}
	var got *abi.TransformResult
	if out != nil {
		r, err := abi.ReadTransformResult(out)
		if err != nil {
			return fmt.Errorf("transform self-test %q: result: %w", e.Name, err)
		}
		got = &r
	}
	if err := e.Check(&rec, got); err != nil {
		return fmt.Errorf("transform self-test %q: %w", e.Name, err)
	}
	return nil
}
