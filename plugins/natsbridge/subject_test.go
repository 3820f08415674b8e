package natsbridge_test

import (
	"strings"
	"testing"

	"github.com/rmq-go/rmq/plugins/natsbridge"
)

func TestEscapeToken(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		// Every name the broker accepts is its own token.
		{"TopicTest", "TopicTest"},
		{"CID_ORDER_GROUP", "CID_ORDER_GROUP"},
		{"GID_2024", "GID_2024"},
		{"GROUP_A1", "GROUP_A1"},
		{"orders-v2", "orders-v2"},
		{"%RETRY%g", "%RETRY%g"},
		{"a|b", "a|b"},
		{"_", "_"},
		// Other bytes are escaped.
		{"a.b", "a~2Eb"},
		{"x y*>", "x~20y~2A~3E"},
		{"~", "~7E"},
		{"a~41", "a~7E41"},
		{"é", "~C3~A9"},
	} {
		got := natsbridge.EscapeToken(c.in)
		if got != c.out {
			t.Errorf("EscapeToken(%q) = %q, want %q", c.in, got, c.out)
		}
		back, err := natsbridge.UnescapeToken(got)
		if err != nil || back != c.in {
			t.Errorf("UnescapeToken(%q) = %q, %v; want %q", got, back, err, c.in)
		}
	}
	for _, bad := range []string{"a.b", "a b", "*", ">", "é", "~", "~4", "~2e", "~41"} {
		if _, err := natsbridge.UnescapeToken(bad); err == nil {
			t.Errorf("UnescapeToken(%q) accepted", bad)
		}
	}
	if s := natsbridge.Subject("ops.rmq", "c 1", "dlq", "%DLQ%", "t.1"); s != "ops.rmq.c~201.dlq.%DLQ%.t~2E1" {
		t.Errorf("Subject = %q", s)
	}
	if s := natsbridge.ResendSubject("rmq", "DefaultCluster"); s != "rmq.DefaultCluster.ctl.resend" {
		t.Errorf("ResendSubject = %q", s)
	}
}

// FuzzEscapeToken checks that every name escapes to one valid subject
// token that decodes back to the name.
func FuzzEscapeToken(f *testing.F) {
	for _, s := range []string{"", "a", "_", "_41", "~41", "__", "%RETRY%CID_1", "a.b.c", "x_FF", "~", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := natsbridge.EscapeToken(s)
		if strings.ContainsFunc(tok, func(r rune) bool {
			return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("_-%|~", r))
		}) {
			t.Fatalf("EscapeToken(%q) = %q has a byte outside A-Za-z0-9_-%%|~", s, tok)
		}
		back, err := natsbridge.UnescapeToken(tok)
		if err != nil || back != s {
			t.Fatalf("round trip of %q: %q → %q, %v", s, tok, back, err)
		}
	})
}
