package natsbridge_test

import (
	"strings"
	"testing"

	"github.com/rmq-go/rmq/plugins/natsbridge"
)

func TestEscapeToken(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		{"TopicTest", "TopicTest"},
		{"CID_ORDER_GROUP", "CID_ORDER_GROUP"},
		{"orders-v2", "orders-v2"},
		{"a.b", "a_2Eb"},
		{"%RETRY%g", "_25RETRY_25g"},
		{"x y*>", "x_20y_2A_3E"},
		{"GROUP_A1", "GROUP_5FA1"}, // _A1 would read as an escape
		{"GROUP_a1", "GROUP_a1"},   // lower-case hex never does
		{"GROUP_A", "GROUP_A"},
		{"_", "_"},
		{"__41", "__5F41"},
		{"é", "_C3_A9"},
		{"a|b", "a_7Cb"},
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
	for _, bad := range []string{"a.b", "a b", "*", ">", "é"} {
		if _, err := natsbridge.UnescapeToken(bad); err == nil {
			t.Errorf("UnescapeToken(%q) accepted", bad)
		}
	}
	if s := natsbridge.Subject("ops.rmq", "c 1", "dlq", "%DLQ%", "t.1"); s != "ops.rmq.c_201.dlq._25DLQ_25.t_2E1" {
		t.Errorf("Subject = %q", s)
	}
	if s := natsbridge.ResendSubject("rmq", "DefaultCluster"); s != "rmq.DefaultCluster.ctl.resend" {
		t.Errorf("ResendSubject = %q", s)
	}
}

// FuzzEscapeToken checks that every name escapes to one valid subject
// token that decodes back to the name.
func FuzzEscapeToken(f *testing.F) {
	for _, s := range []string{"", "a", "_", "_41", "__", "%RETRY%CID_1", "a.b.c", "x_FF", "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := natsbridge.EscapeToken(s)
		if strings.ContainsFunc(tok, func(r rune) bool {
			return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-')
		}) {
			t.Fatalf("EscapeToken(%q) = %q has a byte outside A-Za-z0-9_-", s, tok)
		}
		back, err := natsbridge.UnescapeToken(tok)
		if err != nil || back != s {
			t.Fatalf("round trip of %q: %q → %q, %v", s, tok, back, err)
		}
	})
}
