package sql92

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/rmq-go/rmq/core/message"
)

// TestPrefetchBytewiseSameAsPairs holds the two ways of splitting the
// properties to the same answers, since only one of them runs in a given
// build: well-formed pairs, duplicate keys, and the malformed pieces
// readers skip (no separator, two, a missing final 0x02, empty ones).
func TestPrefetchBytewiseSameAsPairs(t *testing.T) {
	names := []string{"a", "b", "color", "", "a\x01b"}
	cases := []string{
		"", "\x02", "\x02\x02", "a\x01", "a\x011", "a\x011\x02", "\x011\x02",
		"a\x01\x02", "a\x011\x01\x02b\x012\x02", "a\x011\x02a\x012\x02",
		"b\x01x\x02\x02color\x01red", "a1\x02b\x012\x02", "\x01\x01\x02a\x01v",
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab\x01\x02cl")
	for range 20000 {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for _, c := range cases {
		var pairs, bytewise evalState
		pairs.props, bytewise.props = message.Properties(c), message.Properties(c)
		pairs.prefetchPairs(names)
		bytewise.prefetchBytewise(names)
		if pairs.found != bytewise.found {
			t.Fatalf("%q: found %b by pairs, %b bytewise", c, pairs.found, bytewise.found)
		}
		for i := range names {
			if string(pairs.vals[i]) != string(bytewise.vals[i]) {
				t.Fatalf("%q, %q: %q by pairs, %q bytewise", c, names[i], pairs.vals[i], bytewise.vals[i])
			}
		}
	}
}

// TestEvalPastMemoSlots evaluates an expression naming more properties
// than one evaluation remembers: those past memoSlots are looked up on
// each use, with the same answers.
func TestEvalPastMemoSlots(t *testing.T) {
	var kv []string
	expr := ""
	for i := range memoSlots + 3 {
		kv = append(kv, fmt.Sprintf("p%d", i), fmt.Sprint(i))
		if i > 0 {
			expr += " AND "
		}
		expr += fmt.Sprintf("p%d = '%d'", i, i)
	}
	e, err := Compile(expr + " AND p10 IS NOT NULL AND missing IS NULL")
	if err != nil {
		t.Fatal(err)
	}
	if !e.Eval(props(kv...)) {
		t.Errorf("%s: false over %q", e, props(kv...))
	}
	kv[len(kv)-1] = "x" // the last property, past the memo slots
	if e.Eval(props(kv...)) {
		t.Errorf("%s: true with p%d changed", e, memoSlots+2)
	}
	kv[1] = "x" // the first, in a slot
	kv[len(kv)-1] = fmt.Sprint(memoSlots + 2)
	if e.Eval(props(kv...)) {
		t.Errorf("%s: true with p0 changed", e)
	}
}

// TestSameBytewise holds the loop WebAssembly builds compare with to the
// runtime's comparison.
func TestSameBytewise(t *testing.T) {
	words := []string{"", "a", "b", "ab", "ba", "abc", "abd", "color", "colour", "red"}
	for _, x := range words {
		for _, y := range words {
			if got := sameBytewise([]byte(x), y); got != (x == y) {
				t.Errorf("sameBytewise(%q, %q) = %v", x, y, got)
			}
			if got := sameBytewise([]byte(x), []byte(y)); got != (x == y) {
				t.Errorf("sameBytewise(%q, []byte(%q)) = %v", x, y, got)
			}
		}
	}
}
