package main

import (
	"github.com/rmq-go/rmq/filters/sql92"
	"github.com/rmq-go/rmq/sdk"
)

func compile(expr string) (sdk.Matcher, error) {
	e, err := sql92.Compile(expr)
	if err != nil {
		return nil, err
	}
	return sdk.MatcherFunc(func(m *sdk.Message) (bool, error) {
		// The properties are in the stored encoding sql92 reads; the
		// conversion to []byte copies nothing.
		return e.Eval([]byte(m.Properties())), nil
	}), nil
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
