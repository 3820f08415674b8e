package sdk

import (
	"testing"
)

func TestLookupJSON(t *testing.T) {
	doc := []byte(` { "a" : "x\"y", "n": 3.50, "o": {"k": [1, {"z": "}"}], "deep": {"v": "\u00e9\ud83d\ude00"}}, "t": true, "e\u0073c": "1", "a": "second" } `)
	for _, c := range []struct {
		path     []string
		raw, str string
		isString bool
		ok       bool
	}{
		{[]string{"a"}, `x\"y`, `x"y`, true, true},
		{[]string{"n"}, `3.50`, `3.50`, false, true},
		{[]string{"t"}, `true`, `true`, false, true},
		{[]string{"o", "deep", "v"}, `\u00e9\ud83d\ude00`, "é😀", true, true},
		{[]string{"o", "k"}, `[1, {"z": "}"}]`, `[1, {"z": "}"}]`, false, true},
		{[]string{"esc"}, `1`, `1`, true, true},
		{[]string{"missing"}, ``, ``, false, false},
		{[]string{"a", "b"}, ``, ``, false, false},
	} {
		v, ok := LookupJSON(doc, c.path...)
		if string(v.Raw()) != c.raw || v.IsString() != c.isString || ok != c.ok || v.String() != c.str {
			t.Errorf("LookupJSON(%v) = %q (%q), %v, %v; want %q (%q), %v, %v", c.path, v.Raw(), v.String(), v.IsString(), ok, c.raw, c.str, c.isString, c.ok)
		}
		if ok && !v.Equal(c.str) {
			t.Errorf("LookupJSON(%v).Equal(%q) is false", c.path, c.str)
		}
	}
	v, _ := LookupJSON(doc, "a")
	if v.Equal("x") || v.Equal(`x\"y`) {
		t.Error("Equal matched a prefix or the escaped form")
	}
	for _, bad := range []string{``, `[]`, `{"a"}`, `{"a":"x`, `{"a":`, `{a:1}`} {
		if _, ok := LookupJSON([]byte(bad), "a"); ok {
			t.Errorf("LookupJSON in %q succeeded", bad)
		}
	}
	path := []string{"o", "deep", "v"}
	if n := testing.AllocsPerRun(100, func() {
		v, _ := LookupJSON(doc, path...)
		v.Equal("é😀")
	}); n != 0 {
		t.Errorf("LookupJSON and Equal allocate %v times", n)
	}
}
