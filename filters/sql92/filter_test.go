package sql92

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
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

var _ filter = (*Expr)(nil)

func record(t testing.TB, p message.Properties) message.Record {
	t.Helper()
	b, err := message.AppendRecord(nil, &message.Message{Topic: "T", Body: []byte("body"), Properties: p})
	if err != nil {
		t.Fatal(err)
	}
	return message.Record(b)
}

func TestMatch(t *testing.T) {
	e, err := Compile("TAGS = 'TagA' AND a BETWEEN 1 AND 10")
	if err != nil {
		t.Fatal(err)
	}
	if !e.MatchTagHash(0) || !e.MatchTagHash(message.TagHash("TagZ")) || !e.NeedsRecord() {
		t.Fatal("an SQL92 filter must pass every hash and ask for records")
	}
	batch := []message.Record{
		record(t, props("TAGS", "TagA", "a", "5")),
		record(t, props("TAGS", "TagB", "a", "5")),
		record(t, props("TAGS", "TagA", "a", "11")),
		record(t, props("TAGS", "TagA")),
		record(t, nil),
		record(t, props("a", "1", "TAGS", "TagA")),
	}
	out := make([]bool, len(batch))
	if err := e.Match(batch, out); err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, false, false, false, true}; !slices.Equal(out, want) {
		t.Errorf("Match = %v, want %v", out, want)
	}
}

func TestEvalDoesNotAllocate(t *testing.T) {
	many := "'v0', 'v1', 'v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', 'abc'"
	exprs := []string{
		"a > 50 AND a <= 80 AND color = 'red'",
		"color = 'red'",
		"a BETWEEN 1 AND 100 OR a NOT BETWEEN n AND 3",
		"b IN ('x', 'abc') AND b NOT IN (" + many + ")",
		"b CONTAINS 'b' AND b STARTSWITH 'a' AND b NOT ENDSWITH 'x'",
		"t = TRUE AND t <> FALSE AND NOT t",
		"d > 1.5 AND d = 2.5 AND long > 1 AND huge > 1",
		"x IS NULL AND (a > 1) IS NOT NULL AND -a IS NULL AND a = a AND a > d",
		"p1 = 1 OR p2 = 2 OR p3 = 3 OR p4 = 4 OR p5 = 5 OR p6 = 6 OR p7 = 7 OR p8 = 8 OR p9 = 9 OR p10 = 10",
		"a = 65 = TRUE",
	}
	p := props("a", "65", "color", "red", "b", "abc", "n", "-3", "t", "true", "d", "2.5",
		"long", "3.14159265358979323846264338327950288", "huge", "1e305", "p10", "10")
	for _, expr := range exprs {
		e, err := Compile(expr)
		if err != nil {
			t.Fatalf("Compile(%q): %v", expr, err)
		}
		if allocs := testing.AllocsPerRun(200, func() { e.Eval(p) }); allocs != 0 {
			t.Errorf("Eval(%q): %v allocations", expr, allocs)
		}
	}
	e, _ := Compile(exprs[0])
	batch := []message.Record{record(t, p), record(t, p)}
	out := make([]bool, 2)
	if allocs := testing.AllocsPerRun(200, func() { _ = e.Match(batch, out) }); allocs != 0 {
		t.Errorf("Match: %v allocations", allocs)
	}
}

func TestConcurrentEval(t *testing.T) {
	e, err := Compile("a > 50 AND a <= 80 AND color = 'red' OR b IN ('x')")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				v := fmt.Sprint((i + g) % 100)
				want := (i+g)%100 > 50 && (i+g)%100 <= 80
				if got := e.Eval(props("a", v, "color", "red")); got != want {
					t.Errorf("a=%s: %v", v, got)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCache(t *testing.T) {
	c := NewCache(3)
	e1, err := c.Compile("a = 1")
	if err != nil {
		t.Fatal(err)
	}
	e2, _ := c.Compile("a = 1")
	if e1 != e2 {
		t.Error("the same expression compiled twice")
	}
	_, err1 := c.Compile("a = ")
	_, err2 := c.Compile("a = ")
	var se *SyntaxError
	if !errors.As(err1, &se) || err1 != err2 {
		t.Errorf("errors not cached: %v, %v", err1, err2)
	}
	c.Compile("b = 1")
	c.Compile("a = 1") // most recently used again
	c.Compile("c = 1") // evicts "a = "
	if c.Len() != 3 {
		t.Errorf("Len() = %d, want 3", c.Len())
	}
	if e3, _ := c.Compile("a = 1"); e3 != e1 {
		t.Error("a recently used entry was evicted")
	}
	if _, err3 := c.Compile("a = "); err3 == err1 {
		t.Error("the least recently used entry was kept")
	}

	if _, err := c.Compile(strings.Repeat("x", MaxExprLen+1)); !errors.Is(err, ErrTooLong) {
		t.Errorf("over-long: %v", err)
	}
	if c.Len() != 3 {
		t.Errorf("an over-long expression was cached: Len() = %d", c.Len())
	}
	if NewCache(0).max != DefaultCacheSize {
		t.Error("NewCache(0) does not use the default size")
	}
}

// TestCacheCompilesOnce starts many goroutines on the same new expression:
// one compiles, the rest wait and share its result.
func TestCacheCompilesOnce(t *testing.T) {
	c := NewCache(16)
	for round := range 20 {
		expr := fmt.Sprintf("a = %d AND b IN ('x', 'y') AND c BETWEEN 1 AND 2", round)
		const n = 16
		got := make([]*Expr, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				e, err := c.Compile(expr)
				if err != nil {
					t.Error(err)
				}
				got[i] = e
			})
		}
		close(start)
		wg.Wait()
		for i := range got {
			if got[i] != got[0] {
				t.Fatalf("round %d: goroutines got different compilations", round)
			}
		}
	}
	if c.Len() != 16 {
		t.Errorf("Len() = %d, want 16", c.Len())
	}
}
