package main

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/rmq-go/rmq/sdk"
)

// condition is one path=value test.
type condition struct {
	path  []string
	value []byte
}

// matcher holds a compiled expression.
type matcher struct{ conds []condition }

// filter is the registered sdk.Filter; it reads bodies.
type filter struct{}

func (filter) NeedsBody() bool { return true }

func (filter) Compile(expr string) (sdk.Matcher, error) {
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
		m.conds = append(m.conds, condition{path: keys, value: []byte(value)})
	}
	return &m, nil
}

// inflated holds decompressed bodies; reused from message to message.
var (
	inflated bytes.Buffer
	inflater io.ReadCloser
)

// body returns m's body, inflated if the producer compressed it, or nil if
// it cannot be read.
func body(m *sdk.Message) []byte {
	if !m.Compressed() {
		return m.Body()
	}
	inflated.Reset()
	var err error
	if inflater == nil {
		inflater, err = zlib.NewReader(bytes.NewReader(m.Body()))
	} else {
		err = inflater.(zlib.Resetter).Reset(bytes.NewReader(m.Body()), nil)
	}
	if err != nil {
		return nil
	}
	if _, err := inflated.ReadFrom(inflater); err != nil {
		return nil
	}
	return inflated.Bytes()
}

func (m *matcher) Match(msg *sdk.Message) (bool, error) {
	doc := body(msg)
	if doc == nil {
		return false, nil
	}
	for _, c := range m.conds {
		raw, isString, ok := lookup(doc, c.path)
		if !ok {
			return false, nil
		}
		if isString {
			if !stringEquals(raw, c.value) {
				return false, nil
			}
		} else if !bytes.Equal(raw, c.value) {
			return false, nil
		}
	}
	return true, nil
}

func init() {
	sdk.RegisterFilter(filter{})
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
