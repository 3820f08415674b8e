package sql92

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSyntaxErrors(t *testing.T) {
	tests := []struct {
		expr string
		want string
	}{
		{"(a = 1 AND b = 2", `sql92: at 16: expected ")" but found end of input`},
		{"", `sql92: at 0: expected a value but found end of input`},
		{"   ", `sql92: at 3: expected a value but found end of input`},
		{"a =", `sql92: at 3: expected a value but found end of input`},
		{"a > --5", `sql92: at 7: expected a value but found end of input`},
		{"a = 1 AND", `sql92: at 9: expected a value but found end of input`},
		{"a = 1 AND OR b = 2", `sql92: at 10: expected a value but found "OR"`},
		{"a = NOT b", `sql92: at 4: expected a value but found "NOT"`},
		{"a > 'x'", `sql92: at 4: expected a number or a property name but found "'x'"`},
		{"'x' < a", `sql92: at 0: expected a number or a property name but found "'x'"`},
		{"a > TRUE", `sql92: at 4: expected a number or a property name but found "TRUE"`},
		{"a >= NULL", `sql92: at 5: expected a number or a property name but found "NULL"`},
		{"(a = 1) > 2", `sql92: at 1: expected a number or a property name but found "a = 1"`},
		{"a > 1 > 2", `sql92: at 0: expected a number or a property name but found "a > 1"`},
		{"a BETWEEN 'x' AND 'y'", `sql92: at 10: expected a number or a property name but found "'x'"`},
		{"a = NULL", `sql92: at 4: expected a value other than NULL (test with IS NULL) but found "NULL"`},
		{"NULL <> a", `sql92: at 0: expected a value other than NULL (test with IS NULL) but found "NULL"`},
		{"TRUE = 1", `sql92: at 7: expected a literal of the same type as TRUE but found "1"`},
		{"'x' = FALSE", `sql92: at 6: expected a literal of the same type as 'x' but found "FALSE"`},
		{"a BETWEEN 5 AND 1", `sql92: at 10: expected a lower bound not above the upper bound 1 but found "5"`},
		{"a NOT BETWEEN 2.5 AND -1", `sql92: at 14: expected a lower bound not above the upper bound -1 but found "2.5"`},
		{"a BETWEEN 1 OR 5", `sql92: at 12: expected "AND" but found "OR"`},
		{"a BETWEEN 1", `sql92: at 11: expected "AND" but found end of input`},
		{"a IN ()", `sql92: at 6: expected a string literal but found ")"`},
		{"a IN 'x'", `sql92: at 5: expected "(" but found "'x'"`},
		{"a IN ('x' 'y')", `sql92: at 10: expected "," or ")" but found "'y'"`},
		{"a IN ('x',)", `sql92: at 10: expected a string literal but found ")"`},
		{"a IN ('x'", `sql92: at 9: expected "," or ")" but found end of input`},
		{"a IN (1)", `sql92: at 6: expected a string literal but found "1"`},
		{"'x' IN ('x')", `sql92: at 0: expected a property name before IN but found "'x'"`},
		{"(a = 1) NOT IN ('x')", `sql92: at 1: expected a property name before IN but found "a = 1"`},
		{"a CONTAINS 5", `sql92: at 11: expected a string literal but found "5"`},
		{"a NOT STARTSWITH b", `sql92: at 17: expected a string literal but found "b"`},
		{"a IS 5", `sql92: at 5: expected "NULL" or "NOT NULL" but found "5"`},
		{"a IS NOT 5", `sql92: at 9: expected "NULL" but found "5"`},
		{"a NOT = 1", `sql92: at 6: expected "BETWEEN", "IN", "CONTAINS", "STARTSWITH" or "ENDSWITH" after NOT but found "="`},
		{"a NOT", `sql92: at 5: expected "BETWEEN", "IN", "CONTAINS", "STARTSWITH" or "ENDSWITH" after NOT but found end of input`},
		{"a = 1 b = 2", `sql92: at 6: expected an operator or end of input but found "b"`},
		{"a = 1)", `sql92: at 5: expected an operator or end of input but found ")"`},
		{"a = 1 ORR b = 2", `sql92: at 6: expected an operator or end of input but found "ORR"`},
		{"5", `sql92: at 0: expected a boolean expression but found "5"`},
		{"'x'", `sql92: at 0: expected a boolean expression but found "'x'"`},
		{"-a", `sql92: at 0: expected a boolean expression but found "-a"`},
		{"a = 1 AND 5", `sql92: at 10: expected a boolean expression but found "5"`},
		{"2.5 OR a = 1", `sql92: at 0: expected a boolean expression but found "2.5"`},
		{"NOT 'x'", `sql92: at 4: expected a boolean expression but found "'x'"`},
		{"a ! b", `sql92: at 2: expected an operator, a value or a property name but found "!"`},
		{"a != 1", `sql92: at 2: expected an operator, a value or a property name but found "!"`},
		{"a == 1", `sql92: at 3: expected a value but found "="`},
		{"a = é", `sql92: at 4: expected an operator, a value or a property name but found "é"`},
		{"a = \"x\"", `sql92: at 4: expected an operator, a value or a property name but found "\""`},
		{"a.b = 1", `sql92: at 1: expected an operator, a value or a property name but found "."`},
		{"a = 'abc", `sql92: at 8: expected "'" closing the string at 4 but found end of input`},
		{"a = 'it''s", `sql92: at 10: expected "'" closing the string at 4 but found end of input`},
		{"a = 1 /* x", `sql92: at 10: expected "*/" closing the comment at 6 but found end of input`},
		{"a = 012", `sql92: at 4: expected a number without leading zeros but found "012"`},
		{"a = 9223372036854775808", `sql92: at 4: expected an integer between -9223372036854775808 and 9223372036854775807 but found "9223372036854775808"`},
		{"a = -9223372036854775809", `sql92: at 4: expected an integer between -9223372036854775808 and 9223372036854775807 but found "9223372036854775809"`},
		{"a = -(-9223372036854775808)", `sql92: at 4: expected an integer between -9223372036854775808 and 9223372036854775807 but found the negation of "-9223372036854775808"`},
		{"a = 1e999", `sql92: at 4: expected a number within the range of a double but found "1e999"`},
		{"a = 1e-999", `sql92: at 4: expected a number within the range of a double but found "1e-999"`},
		{"a = 5.5L", `sql92: at 7: expected an operator or end of input but found "L"`},
		{"a = '" + strings.Repeat("x", 60) + "' AND 7", `sql92: at 71: expected a boolean expression but found "7"`},
		{"7 AND a = '" + strings.Repeat("x", 60) + "'", `sql92: at 0: expected a boolean expression but found "7"`},
		{"a = 1 AND ('" + strings.Repeat("x", 50) + "' < a)", `sql92: at 11: expected a number or a property name but found "'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."`},
	}
	for _, tt := range tests {
		e, err := Compile(tt.expr)
		if err == nil {
			t.Errorf("Compile(%q) = %s, want error %s", tt.expr, e, tt.want)
			continue
		}
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Compile(%q): %T %v is not a *SyntaxError", tt.expr, err, err)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("Compile(%q):\n got %s\nwant %s", tt.expr, err, tt.want)
		}
		if se.Pos < 0 || se.Pos > len(tt.expr) {
			t.Errorf("Compile(%q): position %d outside the input", tt.expr, se.Pos)
		}
	}
}

func TestLimits(t *testing.T) {
	deep := []struct {
		name string
		expr string
	}{
		{"parentheses", strings.Repeat("(", 5000) + "a = 1" + strings.Repeat(")", 5000)},
		{"unclosed parentheses", strings.Repeat("(", 5000)},
		{"NOT chain", strings.Repeat("NOT ", 3000) + "a"},
		{"sign chain", "a = " + strings.Repeat("- ", 5000) + "1"},
		{"equality chain", "a" + strings.Repeat(" = a", 3000)},
		{"IS NULL chain", "a" + strings.Repeat(" IS NULL", 1500)},
	}
	for _, tt := range deep {
		start := time.Now()
		_, err := Compile(tt.expr)
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), "levels of nesting") {
			t.Errorf("%s: error %v, want a nesting error", tt.name, err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("%s: took %v", tt.name, d)
		}
	}

	// Exactly at the depth limit is fine.
	atLimit := strings.Repeat("(", MaxDepth-1) + "a = 1" + strings.Repeat(")", MaxDepth-1)
	if _, err := Compile(atLimit); err != nil {
		t.Errorf("%d levels: %v", MaxDepth, err)
	}

	// Long flat expressions are fine: AND and OR lists do not nest.
	var b strings.Builder
	b.WriteString("a = 0")
	for i := 0; b.Len() < MaxExprLen-20; i++ {
		b.WriteString(" OR a = 1 AND b = 2")
	}
	e, err := Compile(b.String())
	if err != nil {
		t.Fatalf("long flat expression: %v", err)
	}
	if e.Eval(props("a", "1", "b", "2")) != true {
		t.Error("long flat expression does not match")
	}

	_, err = Compile(strings.Repeat(" ", MaxExprLen+1))
	if !errors.Is(err, ErrTooLong) {
		t.Errorf("over-long expression: %v", err)
	}
}

func TestString(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"a>50 and a<=80 and color='red'", "a > 50 AND a <= 80 AND color = 'red'"},
		{"(a = 1 OR b = 2) AND c = 3", "(a = 1 OR b = 2) AND c = 3"},
		{"a = 1 OR (b = 2 AND c = 3)", "a = 1 OR b = 2 AND c = 3"},
		{"((a = 1))", "a = 1"},
		{"(a = 1 AND b = 2) AND c = 3", "a = 1 AND b = 2 AND c = 3"},
		{"a = 1 OR (b = 2 OR c = 3)", "a = 1 OR b = 2 OR c = 3"},
		{"not a = 1", "NOT (a = 1)"},
		{"NOT NOT a", "NOT NOT a"},
		{"NOT (a OR b)", "NOT (a OR b)"},
		{"a between -1 and 2.50", "a BETWEEN -1 AND 2.5"},
		{"a not between 1 and 2", "a NOT BETWEEN 1 AND 2"},
		{"a not in ('x','it''s')", "a NOT IN ('x', 'it''s')"},
		{"a is not null", "a IS NOT NULL"},
		{"b not startswith 'x' or b endsWith 'y' or b contains 'z'", "b NOT STARTSWITH 'x' OR b ENDSWITH 'y' OR b CONTAINS 'z'"},
		{"a = 5L", "a = 5"},
		{"a = 1e3", "a = 1000.0"},
		{"a = 1.5e300", "a = 1.5e+300"},
		{"a = .5", "a = 0.5"},
		{"a = -0.0", "a = -0.0"},
		{"- - 5 = a", "5 = a"},
		{"+a = +'x'", "a = 'x'"},
		{"-(a) = 1", "-a = 1"},
		{"- -a = 1", "-(-a) = 1"},
		{"-(a = 1) = 1", "-(a = 1) = 1"},
		{"a = 1 = TRUE", "a = 1 = TRUE"},
		{"a = (b = TRUE)", "a = (b = TRUE)"},
		{"(a > 1) IS NULL", "a > 1 IS NULL"},
		{"(NOT a) IS NULL", "(NOT a) IS NULL"},
		{"(a) NOT IN ('x')", "a NOT IN ('x')"},
		{"a /* comment */ = 1 -- trailing", "a = 1"},
		{"true", "TRUE"},
		{"a = -9223372036854775808", "a = -9223372036854775808"},
	}
	for _, tt := range tests {
		e, err := Compile(tt.expr)
		if err != nil {
			t.Errorf("Compile(%q): %v", tt.expr, err)
			continue
		}
		if got := e.String(); got != tt.want {
			t.Errorf("Compile(%q).String() = %q, want %q", tt.expr, got, tt.want)
		}
		again, err := Compile(e.String())
		if err != nil || again.String() != e.String() {
			t.Errorf("canonical form %q does not round-trip: %v", e.String(), err)
		}
	}
}

func TestProperties(t *testing.T) {
	e, err := Compile("a > 1 AND (b = 'x' OR a < 5) AND TAGS IN ('t')")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(e.Properties(), ","); got != "a,b,TAGS" {
		t.Errorf("Properties() = %s", got)
	}
}
