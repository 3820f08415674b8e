package main

import (
	"github.com/rmq-go/rmq/filters/sql92"
	"github.com/rmq-go/rmq/sdk"
)

// matcher evaluates one compiled expression.
type matcher struct{ e *sql92.Expr }

// Match evaluates the expression over the message's properties, which are
// in the stored encoding sql92 reads; the conversion copies nothing.
func (m matcher) Match(msg *sdk.Message) (bool, error) {
	return m.e.Eval([]byte(msg.Properties())), nil
}

// PropertyKeys names the properties the expression refers to, so the
// broker sends only those: scanning the rest would cost more than the
// evaluation.
func (m matcher) PropertyKeys() []string { return m.e.Properties() }

func compile(expr string) (sdk.Matcher, error) {
	e, err := sql92.Compile(expr)
	if err != nil {
		return nil, err
	}
	return matcher{e}, nil
}

func init() {
	sdk.RegisterFilter(sdk.FilterFunc(compile))
	sdk.SetVersion("1.0.0")
	for _, t := range []sdk.FilterTest{
		{Expression: "a > 5 AND TAGS = 'TagA'", Message: sdk.TestMessage{Tags: "TagA", Properties: map[string]string{"a": "6"}}, Match: true},
		{Expression: "a > 5 AND TAGS = 'TagA'", Message: sdk.TestMessage{Tags: "TagA", Properties: map[string]string{"a": "5"}}, Match: false},
		{Expression: "region IN ('eu', 'us') OR b IS NULL", Message: sdk.TestMessage{Properties: map[string]string{"b": "x"}}, Match: false},
	} {
		sdk.AddFilterTest(t)
	}
}

func main() {}
