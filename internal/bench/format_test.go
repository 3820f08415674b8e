package bench

import (
	"strings"
	"testing"
)

func TestWriteTable(t *testing.T) {
	var b strings.Builder
	WriteTable(&b, [][]string{{"stage", "RSS"}, {"1. idle", "21.0 MiB"}, {"2. µ", "1"}})
	want := "| stage   | RSS      |\n" +
		"| ------- | -------- |\n" +
		"| 1. idle | 21.0 MiB |\n" +
		"| 2. µ    | 1        |\n"
	if b.String() != want {
		t.Errorf("table\n%s\nwant\n%s", b.String(), want)
	}
}

func TestWrap(t *testing.T) {
	got := Wrap("one two three four five", 9, "  ")
	if want := "one two\n  three\n  four\n  five\n"; got != want {
		t.Errorf("Wrap = %q, want %q", got, want)
	}
	if got := Wrap("   lead kept", 80, ""); got != "   lead kept\n" {
		t.Errorf("Wrap with leading spaces = %q", got)
	}
}
