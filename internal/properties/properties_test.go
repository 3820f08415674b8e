package properties_test

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"github.com/rmq-go/rmq/internal/properties"
	"github.com/rmq-go/rmq/sdk"
)

// sdkAgrees fails t unless the sdk's reader (a copy in its own module, which
// cannot import this package) reads in as this codec does: the same value
// for key and the same pairs in the same order.
func sdkAgrees(t *testing.T, in []byte, key string) {
	t.Helper()
	v, ok := properties.Lookup(in, key)
	if sv, sok := sdk.Properties(in).Lookup(key); sv != string(v) || sok != ok {
		t.Fatalf("Lookup(%q, %q): codec %q, %v; sdk %q, %v", in, key, v, ok, sv, sok)
	}
	var want, got []string
	for rest := in; len(rest) > 0; {
		var k, v []byte
		var ok bool
		if k, v, rest, ok = properties.Next(rest); ok {
			want = append(want, string(k), string(v))
		}
	}
	sdk.Properties(in).Each(func(k, v string) bool {
		got = append(got, k, v)
		return true
	})
	if !slices.Equal(got, want) {
		t.Fatalf("pairs of %q: codec %q, sdk %q", in, want, got)
	}
}

func TestLookup(t *testing.T) {
	for _, c := range []struct {
		in, key, want string
		found         bool
	}{
		{"a\x01b\x02", "a", "b", true},
		{"a\x01b", "a", "b", true},                    // no trailing 0x02
		{"a\x01b\x02a\x01c\x02", "a", "c", true},      // the last value wins
		{"a\x01\x02", "a", "", true},                  // an empty value reads
		{"a\x01b\x01c\x02a\x01d\x02", "a", "d", true}, // two 0x01: skipped
		{"ab\x02a\x01x\x02", "a", "x", true},          // no 0x01: skipped
		{"a\x01b\x01c\x02", "a", "", false},
		{"\x02\x02", "", "", false},
		{"", "a", "", false},
	} {
		sdkAgrees(t, []byte(c.in), c.key)
		v, ok := properties.Lookup([]byte(c.in), c.key)
		if string(v) != c.want || ok != c.found {
			t.Errorf("Lookup(%q, %q) = %q, %v; want %q, %v", c.in, c.key, v, ok, c.want, c.found)
		}
	}
}

func TestEncode(t *testing.T) {
	m := map[string]string{"b": "2", "a": "1", "": "x", "e": "", "s\x01": "y", "v": "z\x02"}
	got := properties.Encode(m)
	if want := "a\x011\x02b\x012\x02"; string(got) != want {
		t.Fatalf("Encode = %q, want %q", got, want)
	}
	if allocs := testing.AllocsPerRun(100, func() { properties.Lookup(got, "b") }); allocs != 0 {
		t.Errorf("Lookup allocates %v times", allocs)
	}
}

// FuzzProperties checks that the sdk's reader agrees with this codec, that
// reading never fails on any input, that what
// Next yields holds no separator, and that what Encode writes reads back.
func FuzzProperties(f *testing.F) {
	f.Add([]byte("a\x01b\x02c\x01d\x02"), "a")
	f.Add([]byte("\x01\x02\x01\x01\x02"), "")
	f.Fuzz(func(t *testing.T, in []byte, key string) {
		sdkAgrees(t, in, key)
		m := map[string]string{}
		for rest := in; len(rest) > 0; {
			k, v, tail, ok := properties.Next(rest)
			if len(tail) >= len(rest) {
				t.Fatalf("Next(%q) did not advance", rest)
			}
			rest = tail
			if !ok {
				continue
			}
			if bytes.ContainsAny(k, "\x01\x02") || bytes.ContainsAny(v, "\x01\x02") {
				t.Fatalf("Next yielded a separator: %q, %q", k, v)
			}
			m[string(k)] = string(v)
		}
		v, ok := properties.Lookup(in, key)
		if want, wantOK := m[key]; string(v) != want || ok != wantOK {
			t.Fatalf("Lookup(%q, %q) = %q, %v; the pairs say %q, %v", in, key, v, ok, want, wantOK)
		}
		enc := properties.Encode(m)
		back := map[string]string{}
		for rest := enc; len(rest) > 0; {
			var k, v []byte
			var ok bool
			k, v, rest, ok = properties.Next(rest)
			if !ok {
				t.Fatalf("Encode wrote a piece that does not read: %q", enc)
			}
			back[string(k)] = string(v)
		}
		maps.DeleteFunc(m, func(k, v string) bool { return k == "" || v == "" })
		if !maps.Equal(back, m) {
			t.Fatalf("Encode(%q) reads back as %q", m, back)
		}
	})
}
