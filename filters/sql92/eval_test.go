package sql92

import (
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/message"
)

// props encodes key/value pairs in order, keeping empty values and
// duplicate keys (EncodeProperties drops the former and cannot express the
// latter).
func props(kv ...string) message.Properties {
	var p message.Properties
	for i := 0; i+1 < len(kv); i += 2 {
		p = append(p, kv[i]...)
		p = append(p, 0x01)
		p = append(p, kv[i+1]...)
		p = append(p, 0x02)
	}
	return p
}

// evalProps is the message most cases evaluate against.
var evalProps = props(
	"a", "65",
	"b", "abc",
	"n", "-3",
	"d", "2.5",
	"z", "0",
	"big", "9223372036854775807",
	"t", "true",
	"T2", "TRUE",
	"f", "false",
	"s", "it's",
	"e", "",
	"sp", " 5",
	"TAGS", "TagA",
)

// slow returns a copy of the tree with the specialised paths turned off, so
// tests can check that both paths agree.
func slow(n *node) *node {
	c := *n
	c.fast = false
	c.kids = make([]*node, len(n.kids))
	for i, k := range n.kids {
		c.kids[i] = slow(k)
	}
	return &c
}

// resolve looks each of e's properties up in p, as a broker that resolves
// values for a plugin does, for EvalValues.
func resolve(e *Expr, p message.Properties) ([][]byte, uint64) {
	vals := make([][]byte, len(e.Properties()))
	var present uint64
	for i, name := range e.Properties() {
		if v, ok := p.Lookup(name); ok {
			vals[i] = v
			present |= 1 << i
		}
	}
	return vals, present
}

// eval3 returns the three-valued result of expr over p, from both paths.
func eval3(t *testing.T, expr string, p message.Properties) string {
	t.Helper()
	e, err := Compile(expr)
	if err != nil {
		t.Fatalf("Compile(%q): %v", expr, err)
	}
	st := evalState{props: p}
	fast := e.root.evalBool(&st)
	st = evalState{props: p}
	generic := slow(e.root).evalBool(&st)
	if fast != generic {
		t.Errorf("%q: specialised path gives %v, generic path %v", expr, fast, generic)
	}
	if e.Eval(p) != (fast == triTrue) {
		t.Errorf("%q: Eval disagrees with evalBool", expr)
	}
	if vals, present := resolve(e, p); e.EvalValues(vals, present) != (fast == triTrue) {
		t.Errorf("%q: EvalValues disagrees with Eval", expr)
	}
	return [...]string{triFalse: "F", triTrue: "T", triUnknown: "U"}[fast]
}

func TestEval(t *testing.T) {
	many := "'v0', 'v1', 'v2', 'v3', 'v4', 'v5', 'v6', 'v7', 'v8', "
	tests := []struct {
		expr string
		want string // T, F or U (NULL)
	}{
		// Comparisons of a property with numbers.
		{"a = 65", "T"},
		{"a = 65.0", "T"},
		{"a = 66", "F"},
		{"a <> 66", "T"},
		{"a <> 65", "F"},
		{"a > 50", "T"},
		{"a > 65", "F"},
		{"a >= 65", "T"},
		{"a < 66", "T"},
		{"a < 65", "F"},
		{"a <= 65", "T"},
		{"a <= 64", "F"},
		{"a > 64.5", "T"},
		{"d > 2", "T"},
		{"d = 2.5", "T"},
		{"d = 2", "F"},
		{"d < 2.50001", "T"},
		{"n < 0", "T"},
		{"n = -3", "T"},
		{"n = - 3", "T"},
		{"n > -3.5", "T"},
		{"a > -5", "T"},
		{"a > +5", "T"},
		{"z = 0", "T"},
		{"z = -0.0", "T"},
		{"a = 65L", "T"},
		{"a > .5", "T"},
		{"a > 5.", "T"},
		{"a > 6.5e1", "F"},
		{"a >= 6.5E1", "T"},
		{"a = 650e-1", "T"},
		// Longs compare exactly; a double turns both sides into doubles.
		{"big = 9223372036854775807", "T"},
		{"big > 9223372036854775806", "T"},
		{"big > 9223372036854775806.0", "F"},
		// The literal may come first.
		{"65 = a", "T"},
		{"50 < a", "T"},
		{"70 < a", "F"},
		{"70 >= a", "T"},
		{"65 <> a", "F"},
		// Text that is not a number: unequal to every number, unordered.
		{"b = 5", "F"},
		{"b <> 5", "T"},
		{"b > 5", "U"},
		{"b <= 5", "U"},
		{"NOT (b > 5)", "U"},
		{"sp = 5", "F"},
		{"sp = ' 5'", "T"},
		{"e > 1", "U"},
		// Strings.
		{"b = 'abc'", "T"},
		{"b = 'ABC'", "F"},
		{"b <> 'abc'", "F"},
		{"b <> 'ABC'", "T"},
		{"s = 'it''s'", "T"},
		{"e = ''", "T"},
		{"a = '65'", "T"},
		{"a = '65.0'", "F"},
		{"'abc' = b", "T"},
		{"'x' = 'x'", "T"},
		{"1 = 1.0", "T"},
		// Two properties: equal as strings, ordered as numbers.
		{"a = a", "T"},
		{"a = b", "F"},
		{"a > d", "T"},
		{"d > a", "F"},
		{"a > b", "U"},
		{"x = a", "U"},
		// Booleans: text is TRUE when it reads "true" in any case.
		{"t = TRUE", "T"},
		{"T2 = TRUE", "T"},
		{"f = FALSE", "T"},
		{"t <> TRUE", "F"},
		{"TRUE = t", "T"},
		{"b = TRUE", "F"},
		{"b = FALSE", "T"},
		{"a = TRUE", "F"},
		{"TRUE", "T"},
		{"FALSE", "F"},
		{"NULL", "U"},
		{"TRUE = TRUE", "T"},
		{"TRUE <> FALSE", "T"},
		// A property as a condition is never TRUE.
		{"t", "F"},
		{"x", "U"},
		{"NOT t", "T"},
		{"NOT x", "U"},
		// NULL (a missing property).
		{"x = 1", "U"},
		{"x <> 1", "U"},
		{"x > 1", "U"},
		{"x = 'a'", "U"},
		{"'a' = x", "U"},
		{"x = TRUE", "U"},
		{"NOT x = 1", "U"},
		{"x IS NULL", "T"},
		{"x IS NOT NULL", "F"},
		{"a IS NULL", "F"},
		{"a IS NOT NULL", "T"},
		{"e IS NULL", "F"},
		{"NULL IS NULL", "T"},
		{"1 IS NULL", "F"},
		{"(x > 1) IS NULL", "T"},
		{"(a > 1) IS NULL", "F"},
		{"(a > 1) IS NOT NULL", "T"},
		{"-a = 1", "U"},
		{"-a IS NULL", "T"},
		{"-'x' IS NULL", "T"},
		// AND, OR, NOT over NULL (three-valued logic).
		{"a = 65 AND x = 1", "U"},
		{"a = 66 AND x = 1", "F"},
		{"x = 1 AND a = 66", "F"},
		{"x = 1 AND x = 2", "U"},
		{"a = 65 OR x = 1", "T"},
		{"x = 1 OR a = 65", "T"},
		{"x = 1 OR a = 66", "U"},
		{"a = 66 OR a = 67", "F"},
		{"NOT (x = 1 OR a = 66)", "U"},
		{"NOT (x = 1 AND a = 66)", "T"},
		{"x = 1 OR x IS NULL", "T"},
		// Precedence and associativity.
		{"a = 65 OR a = 1 AND b = 'zzz'", "T"},
		{"(a = 65 OR a = 1) AND b = 'zzz'", "F"},
		{"a = 1 AND b = 'zzz' OR a = 65", "T"},
		{"NOT a = 1", "T"},
		{"NOT a = 65", "F"},
		{"NOT a > 100", "T"},
		{"NOT a BETWEEN 1 AND 10", "T"},
		{"NOT b IN ('abc')", "F"},
		{"NOT NOT a = 65", "T"},
		{"a = 65 AND NOT b = 'abc' OR TAGS = 'TagA'", "T"},
		{"a > 1 AND a < 100 AND b = 'abc' AND d = 2.5", "T"},
		{"a = 65 = TRUE", "T"},
		{"a = 1 = FALSE", "T"},
		{"x = 1 = TRUE", "U"},
		{"a IS NULL = FALSE", "T"},
		{"a = 1 OR b = 'abc' AND NOT x IS NOT NULL", "T"},
		// BETWEEN: both bounds inclusive.
		{"a BETWEEN 65 AND 70", "T"},
		{"a BETWEEN 60 AND 65", "T"},
		{"a BETWEEN 65 AND 65", "T"},
		{"a BETWEEN 66 AND 70", "F"},
		{"a BETWEEN 50 AND 64", "F"},
		{"a NOT BETWEEN 66 AND 70", "T"},
		{"a NOT BETWEEN 65 AND 70", "F"},
		{"a NOT BETWEEN 60 AND 65", "F"},
		{"d BETWEEN 2 AND 3", "T"},
		{"a BETWEEN 64.5 AND 65.5", "T"},
		{"a BETWEEN -100 AND -1", "F"},
		{"x BETWEEN 1 AND 2", "U"},
		{"x NOT BETWEEN 1 AND 2", "U"},
		{"b BETWEEN 1 AND 2", "U"},
		{"a BETWEEN n AND 100", "T"},
		{"a BETWEEN 1 AND x", "U"},
		{"a BETWEEN 100 AND x", "F"},
		{"a NOT BETWEEN 100 AND x", "T"},
		{"65 BETWEEN 60 AND 70", "T"},
		// IN and NOT IN: string membership, NULL for a missing property.
		{"b IN ('abc', 'def')", "T"},
		{"b IN ('x')", "F"},
		{"b NOT IN ('x')", "T"},
		{"b NOT IN ('x', 'abc')", "F"},
		{"x IN ('a')", "U"},
		{"x NOT IN ('a')", "U"},
		{"NOT x IN ('a')", "U"},
		{"a IN ('65')", "T"},
		{"a IN ('65.0')", "F"},
		{"e IN ('')", "T"},
		{"s IN ('it''s')", "T"},
		{"TAGS IN ('TagA', 'TagB')", "T"},
		{"b IN (" + many + "'abc')", "T"},
		{"b IN (" + many + "'zzz')", "F"},
		{"b NOT IN (" + many + "'zzz')", "T"},
		{"x NOT IN (" + many + "'zzz')", "U"},
		// CONTAINS, STARTSWITH, ENDSWITH: FALSE, never NULL, unless the
		// operand is text and the literal is not empty.
		{"b CONTAINS 'bc'", "T"},
		{"b CONTAINS 'x'", "F"},
		{"b NOT CONTAINS 'x'", "T"},
		{"b NOT CONTAINS 'b'", "F"},
		{"b CONTAINS ''", "F"},
		{"b NOT CONTAINS ''", "F"},
		{"x CONTAINS 'a'", "F"},
		{"x NOT CONTAINS 'a'", "F"},
		{"NOT (x CONTAINS 'a')", "T"},
		{"b STARTSWITH 'ab'", "T"},
		{"b STARTSWITH 'bc'", "F"},
		{"b NOT STARTSWITH 'x'", "T"},
		{"b NOT STARTSWITH 'a'", "F"},
		{"b ENDSWITH 'bc'", "T"},
		{"b ENDSWITH 'ab'", "F"},
		{"b NOT ENDSWITH 'c'", "F"},
		{"b NOT ENDSWITH 'x'", "T"},
		{"a CONTAINS '6'", "T"},
		{"65 CONTAINS '6'", "F"},
		{"'abc' CONTAINS 'b'", "T"},
		{"(a = 65) CONTAINS 'T'", "F"},
		{"s CONTAINS ''''", "T"},
		// Keywords ignore case; property names do not.
		{"a > 1 and b = 'abc'", "T"},
		{"a > 1 AnD b = 'abc'", "T"},
		{"b iS nOt NuLl", "T"},
		{"t = true", "T"},
		{"f = False", "T"},
		{"a bEtWeEn 1 AnD 100", "T"},
		{"b not in ('x')", "T"},
		{"b contains 'a' or FALSE", "T"},
		{"b startsWith 'a'", "T"},
		{"b endswith 'c'", "T"},
		{"not a = 1", "T"},
		{"A > 1", "U"},
		{"tags = 'TagA'", "U"},
		// Comments and white space.
		{"a > 1 -- the rest is a comment", "T"},
		{"a > 1 -- comment\nAND b = 'x'", "F"},
		{"a /* inline */ > 1", "T"},
		{"\ta\n>\r1\f", "T"},
	}
	for _, tt := range tests {
		if got := eval3(t, tt.expr, evalProps); got != tt.want {
			t.Errorf("%q = %s, want %s", tt.expr, got, tt.want)
		}
	}
}

func TestEvalPropertyForms(t *testing.T) {
	tests := []struct {
		expr string
		p    message.Properties
		want string
	}{
		{"a = 2", props("a", "1", "a", "2"), "T"}, // the last value wins
		{"a = 1", props("a", "1", "a", "2"), "F"},
		{"a IS NULL", nil, "T"},
		{"a = 1", message.Properties("garbage"), "U"},
		{"a = 1", props("a", "+1"), "T"},
		{"a = 1", props("a", "01"), "T"},
		{"a > 1", props("a", "1e1"), "T"},
		{"a = 10", props("a", "1e1"), "T"},
		{"a = 10", props("a", "1.0e+1"), "T"},
		{"a > 1", props("a", "1e"), "U"},
		{"a > 1", props("a", "0x10"), "U"},
		{"a > 1", props("a", "1_000"), "U"},
		{"a > 1", props("a", "Infinity"), "U"},
		{"a > 1", props("a", "NaN"), "U"},
		{"a > 1", props("a", "5 "), "U"},
		{"a > 1", props("a", "-"), "U"},
		{"a > 1", props("a", "."), "U"},
		{"a > 1e308", props("a", "1e309"), "T"},
		{"a < -1e308", props("a", "-1e309"), "T"},
		{"a > 0", props("a", "1e-400"), "F"},
		{"a = 0", props("a", "-1e-400"), "T"},
		{"a > 9223372036854775807", props("a", "9223372036854775808"), "F"},
		{"a >= 9223372036854775807", props("a", "9223372036854775808"), "T"},
		{"a = -9223372036854775808", props("a", "-9223372036854775808"), "T"},
		{"a < -9223372036854775807", props("a", "-9223372036854775808"), "T"},
		{"a = 123456789012345678901234567890", props("a", "1"), "F"}, // rejected at compile time below
	}
	for _, tt := range tests[:len(tests)-1] {
		if got := eval3(t, tt.expr, tt.p); got != tt.want {
			t.Errorf("%q over %q = %s, want %s", tt.expr, tt.p, got, tt.want)
		}
	}
	if _, err := Compile(tests[len(tests)-1].expr); err == nil {
		t.Error("an integer literal beyond int64 compiled")
	}
}

// TestManyProperties covers expressions naming more properties than one
// evaluation remembers.
func TestManyProperties(t *testing.T) {
	var kv, clauses []string
	for i := range 12 {
		name := "p" + string(rune('a'+i))
		kv = append(kv, name, name)
		clauses = append(clauses, name+" = '"+name+"'")
	}
	p := props(kv...)
	expr := strings.Join(clauses, " AND ")
	if got := eval3(t, expr, p); got != "T" {
		t.Errorf("%s = %s", expr, got)
	}
	if got := eval3(t, expr+" AND pl = 'x'", p); got != "F" {
		t.Errorf("last clause ignored: %s", got)
	}
	if got := eval3(t, expr+" AND missing IS NULL", p); got != "T" {
		t.Errorf("missing property: %s", got)
	}
}
