package sql92

import (
	"errors"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
)

var compileSeeds = []string{
	"a > 50 AND a <= 80 AND color = 'red'",
	"(a = 1 OR b = 2) AND NOT c = 3",
	"a BETWEEN -1 AND 2.5e3 OR b NOT BETWEEN 1 AND 2",
	"TAGS IN ('TagA', 'it''s') AND k NOT IN ('x')",
	"s CONTAINS 'x' OR s NOT STARTSWITH 'y' OR s ENDSWITH 'z'",
	"a IS NULL OR b IS NOT NULL = FALSE",
	"t = TRUE AND f <> false AND NULL IS NULL",
	"-a = - -5 AND +b > .5 AND c < 5. AND d = 9223372036854775807L",
	"a = 1 -- comment\nOR /* block */ b = 2",
	"(((a)))",
	"a = 1 = TRUE",
	"(a = 1",
	"a IN ()",
	"a = 'unterminated",
	"a ! b",
	"NOT NOT NOT x",
	"a = -9223372036854775808",
	"1e999 < a",
}

// fuzzPool is the property values the fuzzer assigns to the names an
// expression refers to.
var fuzzPool = []string{"", "0", "1", "65", "-3", "2.5", "abc", "true", "TRUE", "false", "x'y", "1e400", "9223372036854775808", " 1"}

func FuzzCompile(f *testing.F) {
	for i, s := range compileSeeds {
		f.Add(s, []byte{byte(i), byte(i * 7), 0x80, 3})
	}
	f.Fuzz(func(t *testing.T, expr string, data []byte) {
		start := time.Now()
		e, err := Compile(expr)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("Compile took %v", d)
		}
		if err != nil {
			var se *SyntaxError
			switch {
			case errors.As(err, &se):
				if se.Pos < 0 || se.Pos > len(expr) || se.Expected == "" || se.Found == "" {
					t.Fatalf("Compile(%q): bad error %+v", expr, se)
				}
			case errors.Is(err, ErrTooLong):
			default:
				t.Fatalf("Compile(%q): unexpected error %v", expr, err)
			}
			return
		}

		// Properties straight from the fuzzer, and ones that give the
		// expression's own names values from the pool (or leave them out).
		raw := message.Properties(data)
		var kv []string
		for i, name := range e.Properties() {
			if i < len(data) && data[i]&0x80 == 0 {
				kv = append(kv, name, fuzzPool[int(data[i])%len(fuzzPool)])
			}
		}
		named := props(kv...)

		// The canonical form compiles, prints the same and means the same.
		again, err := Compile(e.String())
		if err != nil {
			t.Fatalf("canonical form %q of %q does not compile: %v", e.String(), expr, err)
		}
		if again.String() != e.String() {
			t.Fatalf("canonical form of %q is unstable: %q then %q", expr, e.String(), again.String())
		}
		for _, p := range []message.Properties{raw, named} {
			st := evalState{props: p}
			want := e.root.evalBool(&st)
			st = evalState{props: p}
			if got := slow(e.root).evalBool(&st); got != want {
				t.Fatalf("%q over %q: specialised %v, generic %v", expr, p, want, got)
			}
			st = evalState{props: p}
			if got := again.root.evalBool(&st); got != want {
				t.Fatalf("%q over %q: %v, but its canonical form %q gives %v", expr, p, want, e.String(), got)
			}
			if e.Eval(p) != (want == triTrue) {
				t.Fatalf("%q: Eval disagrees with evalBool", expr)
			}
			if len(e.Properties()) <= 64 {
				if vals, present := resolve(e, p); e.EvalValues(vals, present) != (want == triTrue) {
					t.Fatalf("%q over %q: EvalValues disagrees with Eval", expr, p)
				}
			}
		}
	})
}
