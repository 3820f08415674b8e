package assemblyscript_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// sdkDir is the AssemblyScript SDK, where npm ci installs asc.
const sdkDir = "../../../sdk/assemblyscript"

// quiet drops the host's log lines.
var quiet = slog.New(slog.DiscardHandler)

func record(tb testing.TB, tag, keys string, props map[string]string) message.Record {
	tb.Helper()
	p := map[string]string{"TAGS": tag, "KEYS": keys}
	for k, v := range props {
		p[k] = v
	}
	m := message.Message{Topic: "orders", Body: []byte("body"), Properties: message.EncodeProperties(p)}
	r, err := message.AppendRecord(nil, &m)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

// checkPropFilter loads a build of propfilter into the host and checks its
// matches and the expressions it refuses.
func checkPropFilter(t *testing.T, module []byte) {
	p, err := wasm.Load(t.Context(), wasm.Options{
		Name:     "propfilter",
		Kind:     wasm.KindFilter,
		Module:   module,
		CacheDir: t.TempDir(),
		Logger:   quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(t.Context())
	if s := p.Stats(); s.Version != "1.0.0" {
		t.Fatalf("version %q", s.Version)
	}
	batch := []message.Record{
		record(t, "gold", "k1 k2", map[string]string{"region": "eu"}),
		record(t, "silver", "k3", map[string]string{"region": "us"}),
		record(t, "gold", "", map[string]string{"region": "us", "tier": "vip"}),
		record(t, "", "k2", nil),
		record(t, "gold", "k1", map[string]string{"region": "eu-west"}),
	}
	for expr, want := range map[string][]bool{
		"tag=gold":                  {true, false, true, false, true},
		"tag=gold&region=eu":        {true, false, false, false, false},
		"region=us":                 {false, true, true, false, false},
		"key=k2":                    {true, false, false, true, false},
		"key=k1 & tag = gold":       {true, false, false, false, true},
		"!region":                   {false, false, false, true, false},
		"tier=vip&!missing":         {false, false, true, false, false},
		"region=eu&region=us":       {false, false, false, false, false},
		"tag=gold&key=k1&region=eu": {true, false, false, false, false},
	} {
		f, err := p.Filter(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		got := make([]bool, len(batch))
		if err := f.Match(batch, got); err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s on message %d: %v, want %v", expr, i, got[i], want[i])
			}
		}
	}
	for _, bad := range []string{"", "region", "=eu", "tag=", "a=1&&b=2", "!a=b"} {
		_, err := p.Filter(bad)
		if !errors.Is(err, wasm.ErrExpression) {
			t.Errorf("Filter(%q) = %v, want ErrExpression", bad, err)
		} else if !strings.Contains(err.Error(), "clause") {
			t.Errorf("Filter(%q) = %v, want the guest's reason", bad, err)
		}
	}
}

// TestPropFilter builds propfilter as asc does by default (the module
// initializes itself in its start section: no _initialize, no _start).
func TestPropFilter(t *testing.T) {
	checkPropFilter(t, guestbuild.AssemblyScript(t, sdkDir, "propfilter/index.ts"))
}

// TestPropFilterExportStart builds it with --exportStart _start, which the
// host calls once as it would _initialize.
func TestPropFilterExportStart(t *testing.T) {
	checkPropFilter(t, guestbuild.AssemblyScript(t, sdkDir, "propfilter/index.ts", "--exportStart", "_start"))
}

// TestPropFilterSelfTests: the broker replays the module's self-tests
// (addFilterTest) on load; a build with a vector no correct module passes
// (--use SELFTEST_WRONG=1) is refused with ErrSelfTest.
func TestPropFilterSelfTests(t *testing.T) {
	_, err := wasm.Load(t.Context(), wasm.Options{Name: "propfilter", Kind: wasm.KindFilter,
		Module:   guestbuild.AssemblyScript(t, sdkDir, "propfilter/index.ts", "--use", "SELFTEST_WRONG=1"),
		CacheDir: t.TempDir(), Logger: quiet})
	if !errors.Is(err, wasm.ErrSelfTest) || !strings.Contains(err.Error(), "vector 4") {
		t.Fatalf("err = %v, want ErrSelfTest on the fifth vector", err)
	}
}

// TestPropFilterUntrusted loads propfilter as an untrusted plugin (every
// call under the deadline) and makes the same checks.
func TestPropFilterUntrusted(t *testing.T) {
	p, err := wasm.Load(t.Context(), wasm.Options{Name: "propfilter", Kind: wasm.KindFilter,
		Module:   guestbuild.AssemblyScript(t, sdkDir, "propfilter/index.ts"),
		CacheDir: t.TempDir(), Logger: quiet, Untrusted: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(t.Context())
	f, err := p.Filter("tag=gold&region=eu")
	if err != nil {
		t.Fatal(err)
	}
	batch := []message.Record{record(t, "gold", "", map[string]string{"region": "eu"}), record(t, "gold", "", nil)}
	got := make([]bool, len(batch))
	if err := f.Match(batch, got); err != nil || !got[0] || got[1] {
		t.Fatalf("Match = %v, %v; want [true false]", got, err)
	}
}
