package wasm

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
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
