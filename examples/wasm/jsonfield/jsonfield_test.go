package main_test

import (
	"bytes"
	"compress/zlib"
	"errors"
	"testing"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
	"github.com/rmq-go/rmq/plugins/wasm"
	"github.com/rmq-go/rmq/sdk"
)

func record(tb testing.TB, body []byte, compressed bool) message.Record {
	tb.Helper()
	m := message.Message{Topic: "events", Body: body, Properties: message.EncodeProperties(map[string]string{"TAGS": "t"})}
	if compressed {
		var b bytes.Buffer
		w := zlib.NewWriter(&b)
		w.Write(body)
		w.Close()
		m.Body, m.SysFlag = b.Bytes(), message.SysFlagCompressed
	}
	r, err := message.AppendRecord(nil, &m)
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func TestJSONField(t *testing.T) {
	p, err := wasm.Load(t.Context(), wasm.Options{
		Name:     "jsonfield",
		Kind:     wasm.KindFilter,
		Module:   guestbuild.Module(t, "."),
		CacheDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(t.Context())
	if s := p.Stats(); s.Version != "1.0.0" {
		t.Fatalf("version %q", s.Version)
	}

	bodies := []struct {
		body       string
		compressed bool
	}{
		{`{"region":"eu","tier":"gold","user":{"country":"de"},"n":3}`, false},
		{`{"region":"us","tier":"gold"}`, false},
		{`{"region":"eu","tier":"silver","user":{"country":"fr"}}`, true},
		{`{"region":"e\u0075"}`, false},
		{`["region","eu"]`, false},
		{`not json at all`, false},
		{``, false},
	}
	batch := make([]message.Record, len(bodies))
	for i, b := range bodies {
		batch[i] = record(t, []byte(b.body), b.compressed)
	}
	for expr, want := range map[string][]bool{
		"region=eu":                   {true, false, true, true, false, false, false},
		"region=eu&tier=gold":         {true, false, false, false, false, false, false},
		"user.country=fr":             {false, false, true, false, false, false, false},
		"n=3":                         {true, false, false, false, false, false, false},
		"tier=gold & region=us":       {false, true, false, false, false, false, false},
		"user.country.city=somewhere": {false, false, false, false, false, false, false},
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
				t.Errorf("%s on %s: %v, want %v", expr, bodies[i].body, got[i], want[i])
			}
		}
	}
	for _, bad := range []string{"", "region", "=eu", "a..b=1"} {
		if _, err := p.Filter(bad); !errors.Is(err, wasm.ErrExpression) {
			t.Errorf("Filter(%q) = %v, want ErrExpression", bad, err)
		}
	}
}

// TestSelfTestsNative runs the plugin's self-test vectors in this process,
// the way a plugin author checks them without building a module.
func TestSelfTestsNative(t *testing.T) {
	if err := sdk.CheckSelfTests(); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkJSONField measures the filter on small JSON bodies, per message.
func BenchmarkJSONField(b *testing.B) {
	p, err := wasm.Load(b.Context(), wasm.Options{Name: "jsonfield", Kind: wasm.KindFilter,
		Module: guestbuild.Module(b, "."), CacheDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close(b.Context())
	f, err := p.Filter("region=eu&tier=gold")
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]message.Record, 256)
	for i := range batch {
		batch[i] = record(b, []byte(`{"id":12345,"user":{"name":"someone","country":"de"},"region":"eu","tier":"gold","items":[1,2,3]}`), false)
	}
	out := make([]bool, len(batch))
	for b.Loop() {
		if err := f.Match(batch, out); err != nil {
			b.Fatal(err)
		}
	}
	perMsg := float64(b.Elapsed().Nanoseconds()) / float64(b.N*len(batch))
	b.ReportMetric(perMsg, "ns/msg")
	b.ReportMetric(1e9/perMsg, "msgs/s")
}
