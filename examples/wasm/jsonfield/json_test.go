package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLookup(t *testing.T) {
	doc := []byte(` { "a" : "x\"y", "n": 3.50, "o": {"k": [1, {"z": "}"}], "deep": {"v": "\u00e9\ud83d\ude00"}}, "t": true, "e\u0073c": "1" } `)
	for _, c := range []struct {
		path     []string
		raw      string
		isString bool
		ok       bool
	}{
		{[]string{"a"}, `x\"y`, true, true},
		{[]string{"n"}, `3.50`, false, true},
		{[]string{"t"}, `true`, false, true},
		{[]string{"o", "deep", "v"}, `\u00e9\ud83d\ude00`, true, true},
		{[]string{"o", "k"}, `[1, {"z": "}"}]`, false, true},
		{[]string{"esc"}, `1`, true, true},
		{[]string{"missing"}, ``, false, false},
		{[]string{"a", "b"}, ``, false, false},
	} {
		raw, isString, ok := lookup(doc, c.path)
		if string(raw) != c.raw || isString != c.isString || ok != c.ok {
			t.Errorf("lookup(%v) = %q, %v, %v; want %q, %v, %v", c.path, raw, isString, ok, c.raw, c.isString, c.ok)
		}
	}
	if !stringEquals([]byte(`\u00e9\ud83d\ude00`), []byte("é😀")) || !stringEquals([]byte(`x\"y`), []byte(`x"y`)) ||
		stringEquals([]byte(`ab`), []byte(`abc`)) {
		t.Fatal("stringEquals")
	}
	for _, bad := range []string{``, `[]`, `{"a"}`, `{"a":"x`, `{"a":`, `{a:1}`} {
		if _, _, ok := lookup([]byte(bad), []string{"a"}); ok {
			t.Errorf("lookup in %q succeeded", bad)
		}
	}
}

// FuzzLookup checks the scanner against encoding/json on documents that
// encoding/json accepts: a top-level string field must be found with the
// same decoded value. Documents whose key is not written exactly once, as
// is, are skipped (duplicate keys are read differently, escaped keys are not
// counted).
func FuzzLookup(f *testing.F) {
	f.Add([]byte(`{"region":"eu","n":1}`), "region")
	f.Add([]byte(`{"a":{"b":"c"},"region":"e\u0075"}`), "region")
	f.Fuzz(func(t *testing.T, doc []byte, key string) {
		raw, isString, ok := lookup(doc, []string{key})
		var m map[string]any
		if !utf8.Valid(doc) || json.Unmarshal(doc, &m) != nil {
			return
		}
		want, present := m[key].(string)
		if !present || bytes.Count(doc, []byte(`"`+key+`"`)) != 1 || strings.ContainsAny(key, "\\\x00\"") {
			return
		}
		if !ok || !isString || !stringEquals(raw, []byte(want)) {
			t.Fatalf("lookup(%q, %q) = %q, %v, %v; encoding/json has %q", doc, key, raw, isString, ok, want)
		}
	})
}
