package wasm

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/sdk/abi"
)

func FuzzTagsAndKeys(f *testing.F) {
	f.Add([]byte("TAGS\x01a\x02KEYS\x01k1 k2\x02x\x01y\x02"))
	f.Add([]byte("TAGS\x01a\x01b\x02TAGS\x01c\x02KEYS\x02KEYS\x01\x02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := message.Properties(b)
		tags, keys, _ := scanProperties(nil, p, false, nil)
		wantTags, _ := p.Lookup(message.PropertyTags)
		wantKeys, _ := p.Lookup(message.PropertyKeys)
		if !bytes.Equal(tags, wantTags) || !bytes.Equal(keys, wantKeys) {
			t.Fatalf("scanProperties(%q) = %q, %q; Lookup gives %q, %q", b, tags, keys, wantTags, wantKeys)
		}
	})
}

func FuzzProject(f *testing.F) {
	f.Add([]byte("a\x011\x02b\x012\x02a\x013\x02"), "a", "c")
	f.Add([]byte("a\x01x\x01y\x02a\x02\x01\x02a"), "a", "")
	f.Fuzz(func(t *testing.T, b []byte, k1, k2 string) {
		p := message.Properties(b)
		keys := projectable([]string{k1, k2})
		tags, keyList, projected := scanProperties(nil, p, true, keys)
		got := message.Properties(projected)
		if wantTags, _ := p.Lookup(message.PropertyTags); !bytes.Equal(tags, wantTags) {
			t.Fatalf("TAGS of %q: %q, Lookup gives %q", b, tags, wantTags)
		}
		if wantKeys, _ := p.Lookup(message.PropertyKeys); !bytes.Equal(keyList, wantKeys) {
			t.Fatalf("KEYS of %q: %q, Lookup gives %q", b, keyList, wantKeys)
		}
		for _, k := range []string{k1, k2} {
			v1, ok1 := p.Lookup(k)
			v2, ok2 := got.Lookup(k)
			if ok1 != ok2 || !bytes.Equal(v1, v2) {
				t.Fatalf("Lookup(%q) in %q: %q %v; projected %q: %q %v", k, b, v1, ok1, got, v2, ok2)
			}
		}
	})
}

func TestHistogram(t *testing.T) {
	for _, ns := range []uint64{0, 1, 3, 4, 7, 8, 9, 15, 16, 1000, 123456789, 1 << 62} {
		i := bucketOf(ns)
		if ns > upperBound(i) || (i > 0 && ns <= upperBound(i-1)) {
			t.Fatalf("%d ns in bucket %d with bounds (%d, %d]", ns, i, upperBound(i-1), upperBound(i))
		}
	}
	var h histogram
	if h.quantile(0.99) != 0 {
		t.Fatal("empty histogram")
	}
	for i := range 1000 {
		d := time.Microsecond
		if i >= 985 {
			d = time.Millisecond
		}
		h.record(d)
	}
	if q := h.quantile(0.99); q < time.Millisecond || q > 1300*time.Microsecond {
		t.Fatalf("p99 = %v, want about 1ms", q)
	}
	if q := h.quantile(0.5); q < time.Microsecond || q > 1300*time.Nanosecond {
		t.Fatalf("p50 = %v, want about 1µs", q)
	}
}

func TestCapture(t *testing.T) {
	var c capture
	c.Write([]byte("panic: boom\n"))
	for range 1000 {
		c.Write([]byte("goroutine trace line\n"))
	}
	c.Write([]byte("the end"))
	s := c.String()
	if !strings.HasPrefix(s, "panic: boom\n") || !strings.HasSuffix(s, "the end") || len(s) > captureHead+captureTail+32 {
		t.Fatalf("capture kept %d bytes: %.40q … %.40q", len(s), s, s[len(s)-40:])
	}
	if headline(s) != "panic: boom; goroutine trace line; goroutine trace line" {
		t.Fatalf("headline %q", headline(s))
	}
	c.reset()
	if c.String() != "" {
		t.Fatal("reset")
	}
}

// checkResolved holds resolveProperties to message.Properties.Lookup for
// each of keys, and to scanProperties for TAGS and KEYS.
func checkResolved(t *testing.T, p message.Properties, keys ...string) {
	t.Helper()
	named := make([][]byte, len(keys))
	var dead uint64
	for i, k := range keys {
		named[i] = []byte(k)
		if strings.Contains(k, "\x01") {
			dead |= 1 << i
		}
	}
	var scratch [abi.MaxFilterKeys][]byte
	tags, keyList, out := resolveProperties([]byte("prefix"), p, named, dead, &scratch)
	if !bytes.HasPrefix(out, []byte("prefix")) {
		t.Fatalf("resolveProperties(%q) overwrote dst", p)
	}
	if wantTags, _ := p.Lookup(message.PropertyTags); !bytes.Equal(tags, wantTags) {
		t.Fatalf("TAGS of %q: %q, Lookup gives %q", p, tags, wantTags)
	}
	if wantKeys, _ := p.Lookup(message.PropertyKeys); !bytes.Equal(keyList, wantKeys) {
		t.Fatalf("KEYS of %q: %q, Lookup gives %q", p, keyList, wantKeys)
	}
	for i := range scratch {
		if scratch[i] != nil {
			t.Fatalf("scratch slot %d keeps a reference", i)
		}
	}
	vals := make([][]byte, len(keys))
	present, err := abi.ReadFilterValues(out[len("prefix"):], vals)
	if err != nil {
		t.Fatalf("values of %q for %q do not decode: %v", p, keys, err)
	}
	for i, k := range keys {
		want, ok := p.Lookup(k)
		if got := present&(1<<i) != 0; got != ok || !bytes.Equal(vals[i], want) {
			t.Fatalf("%q in %q: resolved %q (present %v), Lookup gives %q (%v)", k, p, vals[i], got, want, ok)
		}
	}
}

func TestResolveValues(t *testing.T) {
	for _, tc := range []struct {
		p    string
		keys []string
	}{
		{"a\x011\x02b\x012\x02", []string{"a", "b", "c"}},
		{"a\x011\x02b\x012\x02a\x013\x02", []string{"a", "a", "b"}},                // the later pair wins; a key named twice
		{"a\x01\x02b\x01x\x02", []string{"a", "b"}},                                // an empty value is present
		{"a\x01x\x01y\x02a\x012\x02a\x02b\x02", []string{"a", "b"}},                // malformed pieces are skipped
		{"a\x01x\x02a\x01y\x01z\x02", []string{"a"}},                               // a malformed later piece does not win
		{"\x01v\x02TAGS\x01t\x02KEYS\x01k1 k2\x02", []string{"", "TAGS", "a\x01"}}, // the empty key; a key holding 0x01
		{"", []string{"a"}},
		{"ab\x011\x02a\x012", []string{"a", "ab", "b"}}, // a prefix of another key; no final 0x02
	} {
		checkResolved(t, message.Properties(tc.p), tc.keys...)
	}
}

// TestResolveValueLimit covers values at the layout's limit: the largest
// that fits a record's properties field travels, one byte more makes the
// record too large, which Match reports rather than truncating.
func TestResolveValueLimit(t *testing.T) {
	for _, n := range []int{abi.MaxValueLen - 1, abi.MaxValueLen, abi.MaxValueLen + 1} {
		p := message.Properties("a\x01" + strings.Repeat("v", n) + "\x02")
		var scratch [abi.MaxFilterKeys][]byte
		_, _, out := resolveProperties(nil, p, [][]byte{[]byte("a")}, 0, &scratch)
		fr := abi.FilterRecord{Properties: out}
		fits := fr.EncodedLen() >= 0
		if want := 2+n <= 0xFFFF; fits != want {
			t.Fatalf("value of %d bytes: fits %v, want %v", n, fits, want)
		}
		if fits {
			checkResolved(t, p, "a")
		}
	}
}

func FuzzResolveValues(f *testing.F) {
	f.Add([]byte("a\x011\x02b\x012\x02a\x013\x02"), "a", "b", "c")
	f.Add([]byte("a\x01x\x01y\x02a\x02\x01\x02a"), "a", "", "a\x01x")
	f.Fuzz(func(t *testing.T, b []byte, k1, k2, k3 string) {
		checkResolved(t, message.Properties(b), k1, k2, k3)
	})
}
