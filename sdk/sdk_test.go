package sdk

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/sdk/abi"
)

// reset forgets every registration, so each test starts from a fresh module.
func reset(t *testing.T) {
	t.Helper()
	saved := state
	t.Cleanup(func() { state = saved })
	state.filter, state.allocator, state.txn, state.transform = nil, nil, nil, nil
	state.exprs, state.lastExpr = nil, nil
	state.filterTests, state.allocateTests, state.txnTests, state.transformTests = nil, nil, nil, nil
	state.buf = nil
	state.staticTests.set = false
}

// tagFilter matches messages whose tag is one of the expression's
// "||"-separated tags, and reads bodies when asked to.
type tagFilter struct{ body bool }

func (f tagFilter) NeedsBody() bool { return f.body }

func (tagFilter) Compile(expr string) (Matcher, error) {
	if expr == "" {
		return nil, errors.New("empty expression")
	}
	tags := strings.Split(expr, "||")
	return MatcherFunc(func(m *Message) (bool, error) {
		if m.Tags() == "boom" {
			return false, errors.New("boom tag")
		}
		for _, t := range tags {
			if m.Tags() == t {
				return true, nil
			}
		}
		return false, nil
	}), nil
}

func filterBatch(t *testing.T, expr string, tags ...string) ([]byte, uint32) {
	t.Helper()
	in := abi.AppendFilterHeader(nil, expr)
	for i, tag := range tags {
		r := abi.FilterRecord{
			QueueID:    int32(i),
			Topic:      []byte("T"),
			Tags:       []byte(tag),
			Properties: encodeProperties(map[string]string{"region": "eu"}, tag, "", false),
		}
		in = abi.AppendFilterRecord(in, &r)
	}
	return in, uint32(len(tags))
}

func TestRunFilter(t *testing.T) {
	reset(t)
	RegisterFilter(tagFilter{})
	buffer(1 << 16)
	in, n := filterBatch(t, "A||B", "A", "C", "B")
	out := make([]byte, n)
	if s := runFilter(in, n, out); s != abi.StatusOK {
		t.Fatalf("status %v: %s", s, abi.ReadError(state.buf))
	}
	want := []byte{abi.FilterMatch, abi.FilterNoMatch, abi.FilterMatch}
	if string(out) != string(want) {
		t.Fatalf("out = %v, want %v", out, want)
	}

	in, n = filterBatch(t, "A", "A", "boom")
	if s := runFilter(in, n, make([]byte, n)); s != abi.StatusFailed || abi.ReadError(state.buf) != "boom tag" {
		t.Fatalf("failing match: status %v, %q", s, abi.ReadError(state.buf))
	}
	in, n = filterBatch(t, "", "A")
	if s := runFilter(in, n, make([]byte, n)); s != abi.StatusBadExpression || abi.ReadError(state.buf) != "empty expression" {
		t.Fatalf("bad expression: status %v, %q", s, abi.ReadError(state.buf))
	}
	in, n = filterBatch(t, "A", "A")
	if s := runFilter(in[:len(in)-1], n, make([]byte, n)); s != abi.StatusBadInput {
		t.Fatalf("truncated batch: status %v", s)
	}
	if got := kinds(); got != abi.KindFilter {
		t.Fatalf("kinds = %v", got)
	}
}

func TestRunFilterAllocatesNothing(t *testing.T) {
	reset(t)
	RegisterFilter(tagFilter{})
	buffer(1 << 16)
	in, n := filterBatch(t, "A||B", "A", "C", "B", "D")
	out := make([]byte, n)
	runFilter(in, n, out) // compile once
	allocs := testing.AllocsPerRun(100, func() {
		if s := runFilter(in, n, out); s != abi.StatusOK {
			t.Fatal(s)
		}
	})
	if allocs != 0 {
		t.Fatalf("runFilter allocates %v times per batch", allocs)
	}
}

func TestUnregisteredKinds(t *testing.T) {
	reset(t)
	buffer(1 << 10)
	if s := runFilter(nil, 0, nil); s != abi.StatusNotImplemented {
		t.Fatalf("filter: %v", s)
	}
	if _, s := runAllocate(nil); s != abi.StatusNotImplemented {
		t.Fatalf("allocate: %v", s)
	}
	if s := runTxnCheck(nil, 0, nil); s != abi.StatusNotImplemented {
		t.Fatalf("txn: %v", s)
	}
}

type halfAllocator struct{}

func (halfAllocator) Allocate(req *AllocateRequest) ([]int, error) {
	var out []int
	for i := range req.Queues {
		if req.Clients[i%len(req.Clients)] == req.ClientID {
			out = append(out, i)
		}
	}
	return out, nil
}

type countingPolicy struct{ limit int32 }

func (p *countingPolicy) Init(config []byte) error {
	if string(config) == "bad" {
		return errors.New("bad config")
	}
	p.limit = int32(len(config))
	return nil
}

func (p *countingPolicy) Check(m *HalfMessage, now int64) (Decision, error) {
	if m.CheckTimes() >= p.limit {
		return Decision{Action: Discard}, nil
	}
	if m.Properties().Get("state") == "done" {
		return Decision{Action: Commit}, nil
	}
	return Decision{Action: Wait, Wait: time.Duration(now-m.StoreTimestamp()) * time.Millisecond}, nil
}

func TestSelfTestsAndInit(t *testing.T) {
	reset(t)
	RegisterFilter(tagFilter{body: true})
	RegisterAllocator(halfAllocator{})
	p := &countingPolicy{}
	RegisterTxnPolicy(p)
	SetVersion("0.1")
	if err := InitForTest([]byte("bad")); err == nil || !strings.Contains(err.Error(), "bad config") {
		t.Fatalf("InitForTest(bad) = %v", err)
	}
	if err := InitForTest([]byte("xxx")); err != nil || p.limit != 3 || string(Config()) != "xxx" {
		t.Fatalf("InitForTest = %v, limit %d", err, p.limit)
	}
	AddFilterTest(FilterTest{Expression: "A", Message: TestMessage{Tags: "A", Body: []byte("b")}, Match: true})
	AddFilterTest(FilterTest{Expression: "A", Message: TestMessage{Tags: "B"}, Match: false})
	AddAllocateTest(AllocateTest{
		Request: AllocateRequest{ClientID: "c1", Clients: []string{"c0", "c1"}, Queues: make([]Queue, 4)},
		Want:    []int{1, 3},
	})
	AddTxnTest(TxnTest{NowMs: 5000, Message: TestHalfMessage{StoreTimestamp: 1000}, Want: Decision{Action: Wait, Wait: 4 * time.Second}})
	AddTxnTest(TxnTest{Message: TestHalfMessage{CheckTimes: 3}, Want: Decision{Action: Discard}})
	AddTxnTest(TxnTest{Message: TestHalfMessage{Properties: map[string]string{"state": "done"}}, Want: Decision{Action: Commit}})
	if err := CheckSelfTests(); err != nil {
		t.Fatal(err)
	}
	vs, err := abi.ReadVectors(selfTests())
	if err != nil || len(vs) != 6 {
		t.Fatalf("vectors: %d, %v", len(vs), err)
	}
	info, err := abi.ReadInfo(infoBlock())
	if err != nil || info.Kinds != abi.KindFilter|abi.KindAllocate|abi.KindTxnCheck || info.Flags != abi.FlagFilterBody || info.PluginVersion != "0.1" {
		t.Fatalf("info = %+v, %v", info, err)
	}

	AddFilterTest(FilterTest{Expression: "A", Message: TestMessage{Tags: "A"}, Match: false})
	if err := CheckSelfTests(); err == nil || !strings.Contains(err.Error(), "self-test 2") {
		t.Fatalf("a wrong vector passed: %v", err)
	}
}

func TestProperties(t *testing.T) {
	p := Properties("a\x011\x02bad\x02b\x012\x02a\x013\x02")
	if v, ok := p.Lookup("a"); !ok || v != "3" {
		t.Fatalf("Lookup(a) = %q, %v", v, ok)
	}
	if _, ok := p.Lookup("bad"); ok {
		t.Fatal("malformed piece found")
	}
	var keys []string
	p.Each(func(k, v string) bool { keys = append(keys, k+"="+v); return true })
	if strings.Join(keys, ",") != "a=1,b=2,a=3" {
		t.Fatalf("Each saw %v", keys)
	}
}

type keyedMatcher struct{ Matcher }

func (keyedMatcher) PropertyKeys() []string { return []string{"region", "TAGS"} }

func TestRunFilterKeys(t *testing.T) {
	reset(t)
	RegisterFilter(FilterFunc(func(expr string) (Matcher, error) {
		m, err := tagFilter{}.Compile(expr)
		if expr == "keyed" {
			return keyedMatcher{m}, err
		}
		return m, err
	}))
	buffer(1 << 10)
	keys, s := runFilterKeys(abi.AppendFilterHeader(nil, "keyed"))
	got, err := abi.ReadKeyList(keys)
	if s != abi.StatusOK || err != nil || strings.Join(got, ",") != "region,TAGS" {
		t.Fatalf("keyed: %v %q %v", s, got, err)
	}
	if keys, s := runFilterKeys(abi.AppendFilterHeader(nil, "A")); s != abi.StatusOK || keys != nil {
		t.Fatalf("all properties: %v %q", s, keys)
	}
	if _, s := runFilterKeys(abi.AppendFilterHeader(nil, "")); s != abi.StatusBadExpression {
		t.Fatalf("bad expression: %v", s)
	}
}

// valueMatcher names region, color and region again, and matches when what
// Value, Property and Properties read agree with the expression: its value
// of region, or "-" for none.
type valueMatcher struct{ want string }

func (valueMatcher) PropertyKeys() []string { return []string{"region", "color", "region"} }

func (m valueMatcher) Match(msg *Message) (bool, error) {
	v, ok := msg.Value(0)
	v2, ok2 := msg.Value(2)
	p, okp := msg.Property("region")
	l, okl := msg.Properties().Lookup("region")
	vals, present := msg.Values()
	if ok != ok2 || ok != okp || ok != okl || string(v) != string(v2) || string(v) != p || p != l ||
		len(vals) != 3 || (present&1 != 0) != ok {
		return false, errors.New("the accessors disagree")
	}
	if _, ok := msg.Value(3); ok {
		return false, errors.New("a slot past the named keys")
	}
	if !ok {
		return m.want == "-", nil
	}
	return string(v) == m.want, nil
}

func TestValueFilter(t *testing.T) {
	reset(t)
	RegisterFilter(ValueFilterFunc(func(expr string) (Matcher, error) { return valueMatcher{expr}, nil }))
	buffer(1 << 10)
	if info, _ := abi.ReadInfo(infoBlock()); !info.Flags.Has(abi.FlagFilterValues) || info.Minor != 4 {
		t.Fatalf("info block: %+v", info)
	}
	for _, tt := range []struct {
		props map[string]string
		want  string
		match bool
	}{
		{map[string]string{"region": "eu", "color": "red"}, "eu", true},
		{map[string]string{"region": "eu"}, "us", false},
		{map[string]string{"color": "red"}, "-", true},
		{map[string]string{"region": "eu"}, "-", false},
	} {
		AddFilterTest(FilterTest{Expression: tt.want, Message: TestMessage{Properties: tt.props}, Match: tt.match})
	}
	// The self-tests carry the values resolved, as the broker sends them.
	vs, err := vectors()
	if err != nil {
		t.Fatal(err)
	}
	var r abi.FilterRecord
	_, rest, _ := abi.ReadFilterHeader(vs[0].In)
	if _, err := abi.ReadFilterRecord(rest, &r); err != nil || string(r.Properties) != "\x02\x00eu\x03\x00red\x02\x00eu" {
		t.Fatalf("vector's properties %q, %v", r.Properties, err)
	}
	if err := CheckSelfTests(); err != nil {
		t.Fatal(err)
	}
	// Reading resolved values allocates nothing.
	in := abi.AppendFilterRecord(abi.AppendFilterHeader(nil, "eu"), &abi.FilterRecord{Properties: []byte("\x02\x00eu\xff\xff\x02\x00eu")})
	out := make([]byte, 1)
	if n := testing.AllocsPerRun(100, func() {
		buf := buffer(uint32(len(in)))
		if s := runFilter(buf[:copy(buf, in)], 1, out); s != abi.StatusOK || out[0] != abi.FilterMatch {
			t.Fatalf("resolved values: %v %d", s, out[0])
		}
	}); n != 0 {
		t.Fatalf("%v allocations per batch", n)
	}
	// A properties field that does not hold the named keys' values is bad
	// input, never a match.
	in = abi.AppendFilterHeader(nil, "eu")
	in = abi.AppendFilterRecord(in, &abi.FilterRecord{Properties: []byte("region\x01eu\x02")})
	if s := runFilter(in, 1, out); s != abi.StatusBadInput {
		t.Fatalf("malformed values: %v", s)
	}
}
