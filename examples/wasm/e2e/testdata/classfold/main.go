// Command classfold is a class filter for the end-to-end tests, a second
// version of jsonfield's idea: expressions are field=value conditions
// joined by "&" over top-level string fields of a JSON body, but values
// compare without regard to case. A body with a "poison" field makes Match
// fail (the broker must then hold the subscription) unless the config is
// "poison=nomatch". Its version label is 2.0.0.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/rmq-go/rmq/sdk"
)

type condition struct{ field, value string }

type filter struct{ poisonNoMatch bool }

func (f *filter) Init(config []byte) error {
	switch string(config) {
	case "":
	case "poison=nomatch":
		f.poisonNoMatch = true
	default:
		return fmt.Errorf("config %q: want nothing or poison=nomatch", config)
	}
	return nil
}

func (f *filter) NeedsBody() bool { return true }

func (f *filter) Compile(expr string) (sdk.Matcher, error) {
	var conds []condition
	for _, part := range strings.Split(expr, "&") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("condition %q: want field=value", part)
		}
		conds = append(conds, condition{k, v})
	}
	return sdk.MatcherFunc(func(m *sdk.Message) (bool, error) {
		var doc map[string]any
		if json.Unmarshal(m.Body(), &doc) != nil {
			return false, nil
		}
		if _, ok := doc["poison"]; ok {
			if f.poisonNoMatch {
				return false, nil
			}
			return false, errors.New("poisoned message: cannot decide")
		}
		for _, c := range conds {
			s, ok := doc[c.field].(string)
			if !ok || !strings.EqualFold(s, c.value) {
				return false, nil
			}
		}
		return true, nil
	}), nil
}

func init() {
	sdk.RegisterFilter(&filter{})
	sdk.SetVersion("2.0.0")
	sdk.AddFilterTest(sdk.FilterTest{Expression: "region=eu", Message: sdk.TestMessage{Body: []byte(`{"region":"EU"}`)}, Match: true})
	sdk.AddFilterTest(sdk.FilterTest{Expression: "region=eu", Message: sdk.TestMessage{Body: []byte(`{"region":"us"}`)}, Match: false})
}

func main() {}
