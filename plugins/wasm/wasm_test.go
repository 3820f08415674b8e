package wasm_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// load loads testdata/basic (or another guest) as a plugin closed at the
// end of the test.
func load(t *testing.T, o wasm.Options) *wasm.Plugin {
	t.Helper()
	if o.Path == "" && o.Module == nil {
		o.Path = guest(t, "basic")
	}
	if o.Kind == "" {
		o.Kind = wasm.KindFilter
	}
	if o.Name == "" {
		o.Name = "basic"
	}
	if o.CacheDir == "" {
		o.CacheDir = cacheDir
	}
	p, err := wasm.Load(ctx(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	return p
}

// match filters batch with expr and returns the results.
func match(t *testing.T, p *wasm.Plugin, expr string, batch []message.Record) ([]bool, error) {
	t.Helper()
	f, err := p.Filter(expr)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(batch))
	return out, f.Match(batch, out)
}

// wantMatches checks that out[i] is true exactly for the tags in want.
func wantTags(t *testing.T, batch []message.Record, out []bool, want ...string) {
	t.Helper()
	for i, r := range batch {
		tag := r.Properties().Tags()
		exp := false
		for _, w := range want {
			exp = exp || tag == w
		}
		if out[i] != exp {
			t.Fatalf("record %d (tag %q): match %v, want %v", i, tag, out[i], exp)
		}
	}
}

func TestFilter(t *testing.T) {
	p := load(t, wasm.Options{PoolSize: 2})
	batch := records(t, 600, "A", "B", "C") // three calls of at most 256
	out, err := match(t, p, "A||C", batch)
	if err != nil {
		t.Fatal(err)
	}
	wantTags(t, batch, out, "A", "C")
	s := p.Stats()
	if s.Records != 600 || s.Calls != 4 || s.Errors != 0 || s.Version != "basic-1" || s.ABI != 1 ||
		s.Generation != 1 || len(s.SHA256) != 64 || s.P99 <= 0 {
		t.Fatalf("stats: %+v", s)
	}

	f, err := p.Filter("B")
	if err != nil {
		t.Fatal(err)
	}
	if !f.MatchTagHash(12345) || !f.NeedsRecord() || f.Expression() != "B" {
		t.Fatal("a plugin filter must see every record")
	}
	if err := f.Match(nil, nil); err != nil {
		t.Fatal(err)
	}
}

func TestRecycle(t *testing.T) {
	p := load(t, wasm.Options{RecycleAfter: 2, PoolSize: 1})
	f, err := p.Filter("A")
	if err != nil {
		t.Fatal(err)
	}
	batch := records(t, 300, "A", "B")
	for range 5 {
		out := make([]bool, len(batch))
		if err := f.Match(batch, out); err != nil {
			t.Fatal(err)
		}
		wantTags(t, batch, out, "A")
	}
	if s := p.Stats(); s.Instances > 1 || s.Errors != 0 {
		t.Fatalf("stats: %+v", s)
	}
}

func TestFilterBodies(t *testing.T) {
	// Without "body" in the config the module gets no bodies and says so.
	p := load(t, wasm.Options{})
	batch := []message.Record{record(t, "A", 0, []byte("hello world"))}
	if _, err := match(t, p, "body:world", batch); !errors.Is(err, wasm.ErrFailed) || !strings.Contains(err.Error(), "no body") {
		t.Fatalf("bodyless filter: %v", err)
	}

	p = load(t, wasm.Options{Name: "bodies", Config: []byte("body")})
	// 100 records of 10 KiB do not fit one 256 KiB call; one of 300 KiB
	// travels alone.
	big := bytes.Repeat([]byte("x"), 300<<10)
	batch = nil
	for i := range 100 {
		body := bytes.Repeat([]byte{'a' + byte(i%2)}, 10<<10)
		if i%2 == 0 {
			body = append(body, "needle"...)
		}
		batch = append(batch, record(t, "A", int64(i), body))
		if i == 50 {
			batch = append(batch, record(t, "A", 1000, append(big, "needle"...)))
		}
	}
	out := make([]bool, len(batch))
	f, err := p.Filter("body:needle")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Match(batch, out); err != nil {
		t.Fatal(err)
	}
	for i, r := range batch {
		if want := bytes.Contains(r.Body(), []byte("needle")); out[i] != want {
			t.Fatalf("record %d: match %v, want %v", i, out[i], want)
		}
	}
	if s := p.Stats(); s.Calls < 5 {
		t.Fatalf("%d calls for %d bytes of records", s.Calls, 100*10<<10+300<<10)
	}
}

// compressed returns a record whose body is body zlib-compressed, flagged
// as clients flag it.
func compressed(t *testing.T, offset int64, body []byte) message.Record {
	t.Helper()
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	w.Write(body)
	w.Close()
	m := message.Message{Topic: "orders", QueueOffset: offset, Body: b.Bytes(), SysFlag: message.SysFlagCompressed,
		Properties: message.EncodeProperties(map[string]string{"TAGS": "A"})}
	r, err := message.AppendRecord(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFilterInflatedBodies has the host inflate compressed bodies for a
// filter that asks ("inflate"), and only for one that asks: a body that
// does not inflate, or inflates past the limit, reaches the guest as
// stored, and the call goes on.
func TestFilterInflatedBodies(t *testing.T) {
	bomb := bytes.Repeat([]byte("needle "), (4<<20)/7+1) // inflates past 4 MiB
	corrupt := record(t, "A", 3, []byte("needle, but not zlib"))
	batch := []message.Record{
		compressed(t, 0, []byte("a needle inside")),
		compressed(t, 1, []byte("nothing here")),
		record(t, "A", 2, []byte("a plain needle")),
		compressed(t, 4, bomb),
	}
	// A record flagged compressed whose body is not zlib.
	m := message.Message{Topic: "orders", QueueOffset: 3, Body: corrupt.Body(), SysFlag: message.SysFlagCompressed}
	bad, err := message.AppendRecord(nil, &m)
	if err != nil {
		t.Fatal(err)
	}
	batch = append(batch, bad)
	for _, c := range []struct {
		config string
		want   []bool
	}{
		{"body", []bool{false, false, true, false, true}},   // as stored: only plain bodies read
		{"inflate", []bool{true, false, true, false, true}}, // inflated, but not the bomb
	} {
		p := load(t, wasm.Options{Name: "bodies-" + c.config, Config: []byte(c.config)})
		got, err := match(t, p, "body:needle", batch)
		if err != nil {
			t.Fatalf("%s: %v", c.config, err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: matches %v, want %v", c.config, got, c.want)
		}
	}
}

func TestPropertyProjection(t *testing.T) {
	p := load(t, wasm.Options{})
	batch := records(t, 300, "A", "B")
	out, err := match(t, p, "prop:region=eu", batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, ok := range out {
		if !ok {
			t.Fatalf("record %d does not match", i)
		}
	}
	// Tags still come from all the properties.
	out, err = match(t, p, "B", batch)
	if err != nil {
		t.Fatal(err)
	}
	wantTags(t, batch, out, "B")
	if out, err := match(t, p, "prop:region=us", batch); err != nil || out[0] {
		t.Fatalf("region=us: %v, %v", out[0], err)
	}

	// After a reload the filter asks the new module again what it reads.
	f, err := p.Filter("prop:region=eu")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Reload(ctx(t), wasm.Options{Name: "basic", Kind: wasm.KindFilter, Path: guest(t, "basic"),
		CacheDir: cacheDir, Config: []byte("version=2")}); err != nil {
		t.Fatal(err)
	}
	out = make([]bool, len(batch))
	if err := f.Match(batch, out); err != nil || !out[0] || p.Stats().Generation != 2 {
		t.Fatalf("after reload: %v, %v, generation %d", out[0], err, p.Stats().Generation)
	}
}

func TestExpressionRejected(t *testing.T) {
	p := load(t, wasm.Options{})
	_, err := p.Filter("reject")
	var e *wasm.Error
	if !errors.Is(err, wasm.ErrExpression) || !errors.As(err, &e) || e.Plugin != "basic" ||
		!strings.Contains(err.Error(), `"reject" is refused`) {
		t.Fatalf("err = %v", err)
	}
	if _, err := p.Filter(strings.Repeat("x", 5000)); !errors.Is(err, wasm.ErrExpression) {
		t.Fatalf("long expression: %v", err)
	}
}

func TestAllocate(t *testing.T) {
	p := load(t, wasm.Options{Kind: wasm.KindAllocate, Name: "avg"})
	queues := make([]wasm.Queue, 8)
	for i := range queues {
		queues[i] = wasm.Queue{Topic: "t", BrokerName: "b", QueueID: int32(i)}
	}
	clients := []string{"c0", "c1", "c2"}
	seen := map[int]string{}
	for _, c := range clients {
		idx, err := p.Allocate(ctx(t), wasm.AllocateRequest{Group: "g", ClientID: c, Clients: clients, Queues: queues})
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range idx {
			if prev, ok := seen[i]; ok {
				t.Fatalf("queue %d given to %s and %s", i, prev, c)
			}
			seen[i] = c
		}
	}
	if len(seen) != len(queues) {
		t.Fatalf("assigned %d of %d queues", len(seen), len(queues))
	}
	qs, err := p.AllocateQueues(ctx(t), wasm.AllocateRequest{Group: "g", ClientID: "c2", Clients: clients, Queues: queues})
	if err != nil || len(qs) != 2 || qs[0].QueueID != 6 {
		t.Fatalf("AllocateQueues = %v, %v", qs, err)
	}
	_, err = p.Allocate(ctx(t), wasm.AllocateRequest{Group: "g", ClientID: "stranger", Clients: clients, Queues: queues})
	if !errors.Is(err, wasm.ErrFailed) || !strings.Contains(err.Error(), "not in the group") {
		t.Fatalf("unknown client: %v", err)
	}
	if _, err := p.Filter("A"); !errors.Is(err, wasm.ErrKind) {
		t.Fatalf("Filter on an allocate plugin: %v", err)
	}
}

func TestTxnCheck(t *testing.T) {
	p := load(t, wasm.Options{Kind: wasm.KindTxnCheck, Name: "txn"})
	now := time.UnixMilli(100_000)
	props := func(state string) message.Properties {
		return message.EncodeProperties(map[string]string{"state": state})
	}
	msgs := []wasm.HalfMessage{
		{MsgID: "1", Properties: props("commit")},
		{MsgID: "2", Properties: props("rollback")},
		{MsgID: "3", CheckTimes: 3},
		{MsgID: "4", StoreTimestamp: 99_800},
		{MsgID: "5", StoreTimestamp: 10_000},
	}
	out := make([]wasm.TxnDecision, len(msgs))
	if err := p.TxnCheck(ctx(t), now, msgs, out); err != nil {
		t.Fatal(err)
	}
	want := []wasm.TxnDecision{
		{Action: wasm.TxnCommit}, {Action: wasm.TxnRollback}, {Action: wasm.TxnDiscard},
		{Action: wasm.TxnWait, Wait: 800 * time.Millisecond}, {Action: wasm.TxnCheckNow},
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("message %d: %+v, want %+v", i, out[i], want[i])
		}
	}
	many := make([]wasm.HalfMessage, 700)
	for i := range many {
		many[i] = wasm.HalfMessage{MsgID: "m", Properties: props("commit")}
	}
	out = make([]wasm.TxnDecision, len(many))
	if err := p.TxnCheck(ctx(t), now, many, out); err != nil || out[699].Action != wasm.TxnCommit {
		t.Fatalf("700 messages: %v, last %+v", err, out[699])
	}
	err := p.TxnCheck(ctx(t), now, []wasm.HalfMessage{{Properties: props("fail")}}, out[:1])
	if !errors.Is(err, wasm.ErrFailed) {
		t.Fatalf("failing policy: %v", err)
	}
	if wasm.TxnWait.String() != "wait" {
		t.Fatal(wasm.TxnWait.String())
	}
}

func TestKindNotRegistered(t *testing.T) {
	_, err := wasm.Load(ctx(t), wasm.Options{Name: "only-filter", Kind: wasm.KindTxnCheck, Path: guest(t, "basic"), CacheDir: cacheDir,
		Env: map[string]string{"KINDS": "filter"}})
	if !errors.Is(err, wasm.ErrKind) || !strings.Contains(err.Error(), `"only-filter"`) ||
		!strings.Contains(err.Error(), "registers no txncheck") {
		t.Fatalf("err = %v", err)
	}
}

// TestFailures covers every way a plugin fails; each error names the plugin
// and a healthy plugin next to it keeps serving throughout.
func TestFailures(t *testing.T) {
	healthy := load(t, wasm.Options{Name: "healthy"})
	batch := records(t, 10, "A", "B")
	checkHealthy := func() {
		t.Helper()
		out, err := match(t, healthy, "A", batch)
		if err != nil {
			t.Fatalf("healthy plugin: %v", err)
		}
		wantTags(t, batch, out, "A")
	}

	t.Run("panic", func(t *testing.T) {
		p := load(t, wasm.Options{Name: "panicky"})
		_, err := match(t, p, "panic", batch)
		var e *wasm.Error
		if !errors.Is(err, wasm.ErrTrap) || !errors.As(err, &e) || e.Plugin != "panicky" ||
			!strings.Contains(e.Stderr, "asked to panic at offset 0") || !strings.Contains(err.Error(), "panicky") {
			t.Fatalf("err = %v", err)
		}
		checkHealthy()
		// The poisoned instance is replaced; the plugin serves again.
		out, err := match(t, p, "B", batch)
		if err != nil {
			t.Fatal(err)
		}
		wantTags(t, batch, out, "B")
		if s := p.Stats(); s.Traps != 1 || s.Errors != 1 || s.Disabled || !strings.Contains(s.LastError, "panic") {
			t.Fatalf("stats: %+v", s)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		p := load(t, wasm.Options{Name: "loopy", Untrusted: true, Deadline: 50 * time.Millisecond})
		start := time.Now()
		_, err := match(t, p, "loop", batch)
		if !errors.Is(err, wasm.ErrTimeout) || !strings.Contains(err.Error(), "loopy") {
			t.Fatalf("err = %v", err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("deadline of 50ms took %v", d)
		}
		checkHealthy()
		out, err := match(t, p, "A", batch)
		if err != nil {
			t.Fatal(err)
		}
		wantTags(t, batch, out, "A")
		if s := p.Stats(); s.Timeouts != 1 || s.Traps != 0 {
			t.Fatalf("stats: %+v", s)
		}
	})

	t.Run("memory", func(t *testing.T) {
		p := load(t, wasm.Options{Name: "hungry", MaxMemoryPages: 128})
		_, err := match(t, p, "oom", batch)
		var e *wasm.Error
		if !errors.Is(err, wasm.ErrTrap) || !errors.As(err, &e) || !strings.Contains(e.Stderr, "out of memory") ||
			!strings.Contains(err.Error(), "hungry") {
			t.Fatalf("err = %v", err)
		}
		checkHealthy()
		if _, err := match(t, p, "A", batch); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("abi", func(t *testing.T) {
		_, err := wasm.Load(ctx(t), wasm.Options{Name: "future", Kind: wasm.KindFilter, Path: guest(t, "abiv2"), CacheDir: cacheDir})
		if !errors.Is(err, wasm.ErrABIVersion) || !strings.Contains(err.Error(), `"future"`) ||
			!strings.Contains(err.Error(), "built for ABI v2") {
			t.Fatalf("err = %v", err)
		}
		// Same major, a later minor: refused by name too.
		_, err = wasm.Load(ctx(t), wasm.Options{Name: "newer", Kind: wasm.KindFilter, Path: guest(t, "abiminor"), CacheDir: cacheDir})
		if !errors.Is(err, wasm.ErrABIVersion) || !strings.Contains(err.Error(), `"newer"`) ||
			!strings.Contains(err.Error(), "built for ABI v1.999") {
			t.Fatalf("err = %v", err)
		}
		checkHealthy()
	})

	t.Run("sha256", func(t *testing.T) {
		_, err := wasm.Load(ctx(t), wasm.Options{Name: "tampered", Kind: wasm.KindFilter, Path: guest(t, "basic"), CacheDir: cacheDir,
			SHA256: strings.Repeat("ab", 32)})
		if !errors.Is(err, wasm.ErrHash) || !strings.Contains(err.Error(), `"tampered"`) {
			t.Fatalf("err = %v", err)
		}
		good := healthy.Stats().SHA256
		p := load(t, wasm.Options{Name: "pinned", SHA256: strings.ToUpper(good)})
		if p.Stats().SHA256 != good {
			t.Fatal("hash")
		}
		checkHealthy()
	})

	t.Run("policy", func(t *testing.T) {
		hold := load(t, wasm.Options{Name: "hold"})
		if _, err := match(t, hold, "fail", batch); !errors.Is(err, wasm.ErrFailed) {
			t.Fatalf("hold: %v", err)
		}
		open := load(t, wasm.Options{Name: "open", FailurePolicy: wasm.PolicyOpen})
		out, err := match(t, open, "fail", batch)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		for i, ok := range out {
			if !ok {
				t.Fatalf("open policy left record %d unmatched", i)
			}
		}
		if s := open.Stats(); s.Errors != 1 || !strings.Contains(s.LastError, "asked to fail") {
			t.Fatalf("open stats: %+v", s)
		}
	})

	t.Run("init", func(t *testing.T) {
		_, err := wasm.Load(ctx(t), wasm.Options{Name: "misconfigured", Kind: wasm.KindFilter, Path: guest(t, "basic"), CacheDir: cacheDir,
			Config: []byte("init-fail")})
		if !errors.Is(err, wasm.ErrInit) || !strings.Contains(err.Error(), "config says init-fail") ||
			!strings.Contains(err.Error(), "misconfigured") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("selftest", func(t *testing.T) {
		_, err := wasm.Load(ctx(t), wasm.Options{Name: "wrong", Kind: wasm.KindFilter, Path: guest(t, "basic"), CacheDir: cacheDir,
			Config: []byte("bad-selftest")})
		if !errors.Is(err, wasm.ErrSelfTest) || !strings.Contains(err.Error(), "wrong") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("disable", func(t *testing.T) {
		o := wasm.Options{Name: "doomed", Kind: wasm.KindFilter, Path: guest(t, "basic"), MaxFailures: 3}
		p := load(t, o)
		f, err := p.Filter("panic")
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := f.Match(batch, make([]bool, len(batch))); !errors.Is(err, wasm.ErrTrap) {
				t.Fatalf("err = %v", err)
			}
		}
		_, err = match(t, p, "A", batch)
		if !errors.Is(err, wasm.ErrDisabled) || !strings.Contains(err.Error(), "doomed") {
			t.Fatalf("after 3 traps: %v", err)
		}
		if s := p.Stats(); !s.Disabled || s.Traps != 3 {
			t.Fatalf("stats: %+v", s)
		}
		checkHealthy()
		if err := p.Reload(ctx(t), o); err != nil {
			t.Fatal(err)
		}
		if _, err := match(t, p, "A", batch); err != nil || p.Stats().Disabled {
			t.Fatalf("after reload: %v", err)
		}
	})
}

func TestInvalid(t *testing.T) {
	_, err := wasm.Load(ctx(t), wasm.Options{Kind: "map", Path: "x", Module: []byte{1}, SHA256: "zz",
		FailurePolicy: "maybe", MaxMemoryPages: 1 << 20})
	for _, want := range []string{"name is empty", `kind "map"`, "exactly one of path", "sha256", "failure policy", "max memory pages"} {
		if !errors.Is(err, wasm.ErrOptions) || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want it to mention %q", err, want)
		}
	}
	_, err = wasm.Load(ctx(t), wasm.Options{Name: "junk", Kind: wasm.KindFilter, Module: []byte("not wasm")})
	if !errors.Is(err, wasm.ErrModule) || !strings.Contains(err.Error(), "junk") {
		t.Fatalf("junk: %v", err)
	}
	_, err = wasm.Load(ctx(t), wasm.Options{Name: "big", Kind: wasm.KindFilter, Path: guest(t, "basic"), MaxBinarySize: 1 << 20})
	if !errors.Is(err, wasm.ErrModule) || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("big: %v", err)
	}
	_, err = wasm.Load(ctx(t), wasm.Options{Name: "missing", Kind: wasm.KindFilter, Path: filepath.Join(t.TempDir(), "none.wasm")})
	if !errors.Is(err, wasm.ErrModule) {
		t.Fatalf("missing: %v", err)
	}
	// A module with the marker but nothing else the ABI needs, importing a
	// function the host does not offer: every problem is reported.
	_, err = wasm.Load(ctx(t), wasm.Options{Name: "hollow", Kind: wasm.KindFilter, Module: hollowModule()})
	for _, want := range []string{"no memory", "no _initialize", "no broker_buffer", "no broker_init",
		"no broker_filter", "env.dial", "sock_accept: plugins have no sockets"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want it to mention %q", err, want)
		}
	}
	// A WASI module exporting _start instead of _initialize is a command,
	// which would run main and exit; only modules without WASI imports may
	// start with _start.
	_, err = wasm.Load(ctx(t), wasm.Options{Name: "command", Kind: wasm.KindFilter, Module: hollowModule("_start")})
	if !errors.Is(err, wasm.ErrModule) || !strings.Contains(err.Error(), "WASI command (exports _start, not _initialize)") {
		t.Fatalf("command: %v", err)
	}
}

// hollowModule is a hand-assembled module exporting only the ABI v1 marker
// (and the extra names, all the same function) and importing env.dial and
// wasi_snapshot_preview1.sock_accept.
func hollowModule(extra ...string) []byte {
	str := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	exports := func(names []string) []byte {
		b := []byte{byte(len(names))}
		for _, n := range names {
			b = append(append(b, str(n)...), 0, 2)
		}
		return b
	}
	section := func(id byte, body ...[]byte) []byte {
		b := bytes.Join(body, nil)
		return append([]byte{id, byte(len(b))}, b...)
	}
	return bytes.Join([][]byte{
		{0, 'a', 's', 'm', 1, 0, 0, 0},
		section(1, []byte{1, 0x60, 0, 0}), // one type: () → ()
		section(2, []byte{2}, str("env"), str("dial"), []byte{0, 0},
			str("wasi_snapshot_preview1"), str("sock_accept"), []byte{0, 0}),
		section(3, []byte{1, 0}), // one function of type 0
		section(7, exports(append([]string{"broker_abi_v1"}, extra...))), // export function 2
		section(10, []byte{1, 2, 0, 0x0b}),                               // its body: no locals, end
	}, nil)
}

func TestEnvLogAndNoFilesystem(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	p := load(t, wasm.Options{Env: map[string]string{"REGION": "eu"}, Logger: logger})
	batch := records(t, 3, "A")
	for expr, want := range map[string]bool{"env:REGION=eu": true, "env:REGION=us": false, "env:HOME=" + os.Getenv("HOME"): os.Getenv("HOME") == "", "fs": true} {
		out, err := match(t, p, expr, batch)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if out[0] != want {
			t.Fatalf("%s: match %v, want %v", expr, out[0], want)
		}
	}
	if _, err := match(t, p, "log", batch); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "saw topic orders") || !strings.Contains(logs.String(), "plugin=basic") {
		t.Fatalf("logs: %s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func TestClose(t *testing.T) {
	p, err := wasm.Load(ctx(t), wasm.Options{Name: "c", Kind: wasm.KindFilter, Path: guest(t, "basic"), CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	f, err := p.Filter("A")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	batch := records(t, 2, "A")
	if err := f.Match(batch, make([]bool, 2)); !errors.Is(err, wasm.ErrClosed) {
		t.Fatalf("Match after Close: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("second Close did not panic")
		}
	}()
	_ = p.Close(ctx(t))
}

// brokerFilter mirrors core/broker.Filter, which this package must not
// import: a *wasm.Filter is usable wherever the broker wants a Filter.
type brokerFilter interface {
	MatchTagHash(hash int64) bool
	NeedsRecord() bool
	Match(batch []message.Record, out []bool) error
}

var _ brokerFilter = (*wasm.Filter)(nil)
