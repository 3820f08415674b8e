package main

import (
	"fmt"

	"github.com/rmq-go/rmq/filters/sql92"
	"github.com/rmq-go/rmq/sdk"
	"github.com/rmq-go/rmq/sdk/abi"
)

// matcher evaluates one compiled expression over the values of the
// properties it names, which the broker looks up and sends in the order
// named (the filter is an sdk.ValueFilter): the guest scans nothing.
type matcher struct{ e *sql92.Expr }

// Match evaluates the expression over the resolved values; slot i of the
// expression is the i-th key PropertyKeys lists.
func (m matcher) Match(msg *sdk.Message) (bool, error) {
	return m.e.EvalValues(msg.Values()), nil
}

// PropertyKeys names the properties the expression refers to, so the
// broker resolves only those.
func (m matcher) PropertyKeys() []string { return m.e.Properties() }

// wide evaluates an expression naming more properties than the broker
// resolves for one expression (sdk's limit, abi.MaxFilterKeys) over all
// of them.
type wide struct{ e *sql92.Expr }

// Match evaluates the expression over the message's properties, in the
// stored encoding sql92 reads; the conversion copies nothing.
func (m wide) Match(msg *sdk.Message) (bool, error) {
	return m.e.Eval([]byte(msg.Properties())), nil
}

// projected evaluates an expression over the properties it names, sent
// as pieces of the properties string (the filter's config is
// "properties"): the guest scans them, as guests of brokers before
// ABI v1.4 do.
type projected struct{ wide }

// PropertyKeys names the properties the expression refers to.
func (m projected) PropertyKeys() []string { return m.e.Properties() }

// filter compiles SQL92 expressions; it takes resolved values unless its
// config is "properties".
type filter struct{ scan bool }

// Init reads the config: empty, or "properties".
func (f *filter) Init(config []byte) error {
	switch string(config) {
	case "":
		f.scan = false
	case "properties":
		f.scan = true
	default:
		return fmt.Errorf("config %q: want nothing or \"properties\"", config)
	}
	return nil
}

// ResolvesValues reports whether the broker resolves the named properties.
func (f *filter) ResolvesValues() bool { return !f.scan }

// Compile compiles expr.
func (f *filter) Compile(expr string) (sdk.Matcher, error) {
	e, err := sql92.Compile(expr)
	switch {
	case err != nil:
		return nil, err
	case len(e.Properties()) > abi.MaxFilterKeys:
		return wide{e}, nil
	case f.scan:
		return projected{wide{e}}, nil
	}
	return matcher{e}, nil
}

func init() {
	sdk.RegisterFilter(&filter{})
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
