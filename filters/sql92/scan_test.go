package sql92

import (
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
