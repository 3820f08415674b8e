package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rmq-go/rmq/sdk"
)

// matcher holds a compiled expression: conditions, each a field's path and
// the value it must have.
type matcher struct {
	paths  [][]string
	values []string
}

// compile parses path=value[&path=value...].
func compile(expr string) (sdk.Matcher, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, errors.New("empty expression: want path=value[&path=value...]")
	}
	var m matcher
	for _, part := range strings.Split(expr, "&") {
		path, value, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || path == "" {
			return nil, fmt.Errorf("condition %q: want path=value", part)
		}
		keys := strings.Split(path, ".")
		for _, k := range keys {
			if k == "" {
				return nil, fmt.Errorf("condition %q: empty field name in path %q", part, path)
			}
		}
		m.paths = append(m.paths, keys)
		m.values = append(m.values, value)
	}
	return &m, nil
}

// Match reads each condition's field from the body in place. The broker
// inflated a compressed body (sdk.BodyFilterFunc asks it to); one it could
// not inflate, or a body that is not a JSON object, does not match.
func (m *matcher) Match(msg *sdk.Message) (bool, error) {
	for i, path := range m.paths {
		v, ok := msg.JSONField(path...)
		if !ok || !v.Equal(m.values[i]) {
			return false, nil
		}
	}
	return true, nil
}

func init() {
	sdk.RegisterFilter(sdk.BodyFilterFunc(compile))
	sdk.SetVersion("1.0.0")
	for _, t := range []sdk.FilterTest{
		{Expression: "region=eu", Message: sdk.TestMessage{Body: []byte(`{"region":"eu"}`)}, Match: true},
		{Expression: "region=eu", Message: sdk.TestMessage{Body: []byte(`{"region":"us"}`)}, Match: false},
		{Expression: "user.tier=gold&n=3", Message: sdk.TestMessage{Body: []byte(`{"n":3,"user":{"tier":"gold"}}`)}, Match: true},
		{Expression: "region=eu", Message: sdk.TestMessage{Body: []byte(`not json`)}, Match: false},
	} {
		sdk.AddFilterTest(t)
	}
}

func main() {}
