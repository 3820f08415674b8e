package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rmq-go/rmq/sdk"
)

// FuzzLookup checks the sdk's JSON scanner, which this example reads bodies
// with, against encoding/json on documents that encoding/json accepts: a
// top-level string field must be found with the same decoded value.
// Documents whose key is not written exactly once, as is, are skipped
// (duplicate keys are read differently, escaped keys are not counted). It
// lives here, in the broker's module, where CI's fuzz step reaches it.
func FuzzLookup(f *testing.F) {
	f.Add([]byte(`{"region":"eu","n":1}`), "region")
	f.Add([]byte(`{"a":{"b":"c"},"region":"e\u0075"}`), "region")
	f.Fuzz(func(t *testing.T, doc []byte, key string) {
		v, ok := sdk.LookupJSON(doc, key)
		var m map[string]any
		if !utf8.Valid(doc) || json.Unmarshal(doc, &m) != nil {
			return
		}
		want, present := m[key].(string)
		if !present || bytes.Count(doc, []byte(`"`+key+`"`)) != 1 || strings.ContainsAny(key, "\\\x00\"") {
			return
		}
		if !ok || !v.IsString() || !v.Equal(want) || v.String() != want {
			t.Fatalf("LookupJSON(%q, %q) = %q (%q), %v, %v; encoding/json has %q", doc, key, v.Raw(), v.String(), v.IsString(), ok, want)
		}
	})
}
