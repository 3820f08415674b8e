package tag

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/message"
)

// filter is the broker's Filter interface, restated here because this
// package may not import the broker.
type filter interface {
	MatchTagHash(hash int64) bool
	NeedsRecord() bool
	Match(batch []message.Record, out []bool) error
}

var _ filter = (*Filter)(nil)

func TestCompile(t *testing.T) {
	tests := []struct {
		expr   string
		all    bool
		tags   []string
		canon  string
		errIs  error
		errHas string
	}{
		{expr: "*", all: true, canon: "*"},
		{expr: "", all: true, canon: "*"},
		{expr: "   ", all: true, canon: "*"},
		{expr: " * ", all: true, canon: "*"},
		{expr: "TagA", tags: []string{"TagA"}, canon: "TagA"},
		{expr: "TagA || TagB", tags: []string{"TagA", "TagB"}, canon: "TagA || TagB"},
		{expr: "TagA||TagB||TagC", tags: []string{"TagA", "TagB", "TagC"}, canon: "TagA || TagB || TagC"},
		{expr: "  TagA ||\tTagB  ", tags: []string{"TagA", "TagB"}, canon: "TagA || TagB"},
		{expr: "TagA || || TagB ||", tags: []string{"TagA", "TagB"}, canon: "TagA || TagB"},
		{expr: "|| TagA", tags: []string{"TagA"}, canon: "TagA"},
		{expr: "TagA || TagA", tags: []string{"TagA"}, canon: "TagA"},
		{expr: "Tag A || b", tags: []string{"Tag A", "b"}, canon: "Tag A || b"},
		{expr: "標籤 || 😀", tags: []string{"標籤", "😀"}, canon: "標籤 || 😀"},
		{expr: "a*", tags: []string{"a*"}, canon: "a*"},

		{expr: "||", errIs: ErrInvalid, errHas: "names no tag"},
		{expr: " || || ", errIs: ErrInvalid, errHas: "names no tag"},
		{expr: "A | B", errIs: ErrInvalid, errHas: `"A | B" holds '|'`},
		{expr: "A ||| B", errIs: ErrInvalid, errHas: `"| B" holds '|'`},
		{expr: "A || *", errIs: ErrInvalid, errHas: "must stand alone"},
		{expr: "A\x01 || B", errIs: ErrInvalid, errHas: "separator byte"},
		{expr: "A\x02", errIs: ErrInvalid, errHas: "separator byte"},
		{expr: "A\xff", errIs: ErrInvalid, errHas: "not valid UTF-8"},
		{expr: strings.Repeat("x", MaxExprLen+1), errIs: ErrTooLong, errHas: "16385 bytes"},
	}
	for _, tt := range tests {
		f, err := Compile(tt.expr)
		if tt.errIs != nil {
			if !errors.Is(err, tt.errIs) || !strings.Contains(err.Error(), tt.errHas) {
				t.Errorf("Compile(%q) error = %v, want %v containing %q", clip(tt.expr), err, tt.errIs, tt.errHas)
			}
			continue
		}
		if err != nil {
			t.Errorf("Compile(%q): %v", tt.expr, err)
			continue
		}
		if f.IsAll() != tt.all || !slices.Equal(f.Tags(), tt.tags) || f.String() != tt.canon {
			t.Errorf("Compile(%q) = all %v tags %q canon %q, want %v %q %q",
				tt.expr, f.IsAll(), f.Tags(), f.String(), tt.all, tt.tags, tt.canon)
		}
	}
}

func TestLongExpressionAtLimit(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < MaxExprLen-16; i++ {
		b.WriteString("tag")
		b.WriteString(strconv.Itoa(i))
		b.WriteString(" || ")
	}
	f, err := Compile(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tags()) < 100 {
		t.Fatalf("only %d tags", len(f.Tags()))
	}
}

func TestMatch(t *testing.T) {
	many := []string{"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "TagB"}
	tests := []struct {
		expr  string
		match []string // TAGS values that match
		miss  []string // TAGS values that do not
	}{
		{"*", []string{"TagA", "", "anything"}, nil},
		{"TagA", []string{"TagA"}, []string{"taga", "TagA ", "TagB", ""}},
		{"TagA || TagB", []string{"TagA", "TagB"}, []string{"TagC", "TagA || TagB", ""}},
		{strings.Join(many, " || "), many, []string{"t10", "TagA", ""}},
		{"標籤", []string{"標籤"}, []string{"標"}},
	}
	for _, tt := range tests {
		f, err := Compile(tt.expr)
		if err != nil {
			t.Fatal(err)
		}
		if f.NeedsRecord() {
			t.Errorf("%q: NeedsRecord() = true", tt.expr)
		}
		for _, tag := range tt.match {
			if !f.MatchTag(tag) || !f.MatchTagHash(message.TagHash(tag)) {
				t.Errorf("%q: tag %q: MatchTag %v, MatchTagHash %v, want both true",
					tt.expr, tag, f.MatchTag(tag), f.MatchTagHash(message.TagHash(tag)))
			}
		}
		for _, tag := range tt.miss {
			if f.MatchTag(tag) {
				t.Errorf("%q: MatchTag(%q) = true", tt.expr, tag)
			}
			if f.MatchTagHash(message.TagHash(tag)) {
				t.Errorf("%q: MatchTagHash(hash of %q) = true", tt.expr, tag)
			}
		}
	}
}

// TestHashCollision shows that MatchTagHash only says "may match": "Aa" and
// "BB" share a Java string hash, and the string checks tell them apart.
func TestHashCollision(t *testing.T) {
	if message.TagHash("Aa") != message.TagHash("BB") {
		t.Fatal("expected a hash collision")
	}
	f, _ := Compile("Aa")
	if !f.MatchTagHash(message.TagHash("BB")) {
		t.Error("hash check refused a colliding hash")
	}
	if f.MatchTag("BB") {
		t.Error("string check accepted a colliding tag")
	}
}

func record(t testing.TB, props map[string]string) message.Record {
	t.Helper()
	b, err := message.AppendRecord(nil, &message.Message{Topic: "T", Body: []byte("x"), Properties: message.EncodeProperties(props)})
	if err != nil {
		t.Fatal(err)
	}
	return message.Record(b)
}

func TestMatchRecords(t *testing.T) {
	batch := []message.Record{
		record(t, map[string]string{"TAGS": "TagA"}),
		record(t, map[string]string{"TAGS": "TagB", "a": "1"}),
		record(t, map[string]string{"KEYS": "k"}),
		record(t, map[string]string{"TAGS": "TagC"}),
	}
	tests := []struct {
		expr string
		want []bool
	}{
		{"*", []bool{true, true, true, true}},
		{"TagA", []bool{true, false, false, false}},
		{"TagC || TagB", []bool{false, true, false, true}},
		{"t0||t1||t2||t3||t4||t5||t6||t7||t8||TagA", []bool{true, false, false, false}},
	}
	for _, tt := range tests {
		f, err := Compile(tt.expr)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]bool, len(batch))
		if err := f.Match(batch, out); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(out, tt.want) {
			t.Errorf("%q: Match = %v, want %v", tt.expr, out, tt.want)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	small, _ := Compile("TagA || TagB")
	large, _ := Compile("t0||t1||t2||t3||t4||t5||t6||t7||t8||TagA")
	batch := []message.Record{record(t, map[string]string{"TAGS": "TagA", "a": "1"})}
	out := make([]bool, 1)
	for _, f := range []*Filter{small, large} {
		allocs := testing.AllocsPerRun(100, func() {
			_ = f.MatchTagHash(12345)
			_ = f.MatchTag("TagB")
			_ = f.Match(batch, out)
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per match", f, allocs)
		}
	}
}

func FuzzTag(f *testing.F) {
	for _, s := range []string{"*", "", "TagA", "TagA || TagB", "A | B", "||", "A || *", " a ||\tb ", "標籤||x", "\xff"} {
		f.Add(s, "TagA")
	}
	f.Fuzz(func(t *testing.T, expr, tag string) {
		flt, err := Compile(expr)
		if err != nil {
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrTooLong) {
				t.Fatalf("Compile(%q): unexpected error %v", expr, err)
			}
			return
		}
		// The canonical form compiles to the same filter.
		again, err := Compile(flt.String())
		if err != nil || again.String() != flt.String() {
			t.Fatalf("canonical form %q of %q does not round-trip: %v", flt.String(), expr, err)
		}
		// Invariant 3: a string match is never refused by the hash check.
		if flt.MatchTag(tag) && !flt.MatchTagHash(message.TagHash(tag)) {
			t.Fatalf("%q: MatchTag(%q) but not MatchTagHash", expr, tag)
		}
		for _, tg := range flt.Tags() {
			if !flt.MatchTag(tg) || !flt.MatchTagHash(message.TagHash(tg)) {
				t.Fatalf("%q: own tag %q does not match", expr, tg)
			}
			if tg != strings.TrimSpace(tg) || tg == "" || strings.Contains(tg, "|") {
				t.Fatalf("%q: bad tag %q", expr, tg)
			}
		}
	})
}
