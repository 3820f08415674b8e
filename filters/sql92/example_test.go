package sql92_test

import (
	"errors"
	"fmt"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/filters/sql92"
)

func Example() {
	e, err := sql92.Compile("a > 50 AND a <= 80 AND color = 'red'")
	if err != nil {
		panic(err)
	}
	for _, m := range []map[string]string{
		{"a": "65", "color": "red"},
		{"a": "65", "color": "blue"},
		{"a": "99", "color": "red"},
		{"color": "red"}, // a is NULL
	} {
		fmt.Println(m, e.Eval(message.EncodeProperties(m)))
	}
	// Output:
	// map[a:65 color:red] true
	// map[a:65 color:blue] false
	// map[a:99 color:red] false
	// map[color:red] false
}

// Comparisons with a missing property are NULL, which is not a match and
// stays NULL under NOT; IS NULL tests for it.
func Example_null() {
	p := message.EncodeProperties(map[string]string{"b": "1"})
	for _, expr := range []string{
		"a = 1",
		"NOT (a = 1)",
		"a <> 1",
		"a IS NULL",
		"a = 1 OR b = 1",
		"a NOT IN ('x')",
	} {
		e, err := sql92.Compile(expr)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-16s %v\n", expr, e.Eval(p))
	}
	// Output:
	// a = 1            false
	// NOT (a = 1)      false
	// a <> 1           false
	// a IS NULL        true
	// a = 1 OR b = 1   true
	// a NOT IN ('x')   false
}

func ExampleSyntaxError() {
	_, err := sql92.Compile("(a = 1 AND b = 2")
	fmt.Println(err)

	var se *sql92.SyntaxError
	if errors.As(err, &se) {
		fmt.Println(se.Pos, se.Expected)
	}
	// Output:
	// sql92: at 16: expected ")" but found end of input
	// 16 ")"
}

func ExampleExpr_String() {
	e, err := sql92.Compile("not a=1 and (b between 1 and 2.50 or c in ('x','it''s'))")
	if err != nil {
		panic(err)
	}
	fmt.Println(e)
	// Output:
	// NOT (a = 1) AND (b BETWEEN 1 AND 2.5 OR c IN ('x', 'it''s'))
}

func ExampleCache() {
	cache := sql92.NewCache(0)
	e1, _ := cache.Compile("TAGS = 'TagA' AND price > 10")
	e2, _ := cache.Compile("TAGS = 'TagA' AND price > 10")
	fmt.Println(e1 == e2, cache.Len())
	// Output:
	// true 1
}
