// Command jsonmask is a broker transform plugin: it masks fields of JSON
// message bodies before the broker stores them, so what consumers read and
// what lies on disk never holds them. Its config names the fields (dotted
// for nested ones) and, optionally, how many trailing characters of a
// string to keep:
//
//	{"fields": ["card", "customer.email"], "keep": 4}
//
// A masked string becomes "*" for each character but the last keep; any
// other masked value becomes the string "****". A message that has none of
// the fields, or whose body is not JSON, is stored unchanged; a masked
// message gets the property MASKED=true.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o jsonmask.wasm .
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/rmq-go/rmq/sdk"
)

type masker struct {
	paths [][]string
	keep  int
}

// Init reads the config.
func (k *masker) Init(config []byte) error {
	var c struct {
		Fields []string `json:"fields"`
		Keep   int      `json:"keep"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return fmt.Errorf("config: %v", err)
	}
	if len(c.Fields) == 0 {
		return errors.New(`config: no fields; want {"fields": ["card", ...]}`)
	}
	if c.Keep < 0 {
		return fmt.Errorf("config: keep %d is negative", c.Keep)
	}
	k.paths, k.keep = nil, c.Keep
	for _, f := range c.Fields {
		path := strings.Split(f, ".")
		for _, p := range path {
			if p == "" {
				return fmt.Errorf("config: field %q has an empty name in its path", f)
			}
		}
		k.paths = append(k.paths, path)
	}
	k.addTests()
	return nil
}

// addTests adds the self-test that follows from the config: a body holding
// just the first field, the string "1234567890", comes out with the field
// masked but for its last keep characters and the property MASKED=true.
// It is left out when another field shares the first one's top-level
// name, whose masking would change the answer.
func (k *masker) addTests() {
	first := k.paths[0]
	for _, p := range k.paths[1:] {
		if p[0] == first[0] {
			return
		}
	}
	const value = "1234567890"
	keep := min(k.keep, len(value))
	nest := func(v string) []byte { // {"a":{"b":"v"}} for the path a.b
		b, _ := json.Marshal(v)
		for i := len(first) - 1; i >= 0; i-- {
			key, _ := json.Marshal(first[i])
			b = append(append(append(append([]byte{'{'}, key...), ':'), b...), '}')
		}
		return b
	}
	sdk.AddTransformTest(sdk.TransformTest{
		Name:    "the first field masked",
		Message: sdk.TestMessage{Topic: "T", Tags: "t", Body: nest(value)},
		Want: sdk.TransformWant{
			Properties: map[string]string{"TAGS": "t", "MASKED": "true"},
			Body:       nest(strings.Repeat("*", len(value)-keep) + value[len(value)-keep:]),
		},
	})
}

// Transform decodes the body only when one of the fields is present, which
// the sdk's in-place scan tells cheaply.
func (k *masker) Transform(m *sdk.TransformMessage) error {
	present := false
	for _, p := range k.paths {
		if _, ok := m.JSONField(p...); ok {
			present = true
			break
		}
	}
	if !present {
		return nil
	}
	var doc map[string]any
	if err := json.Unmarshal(m.Body(), &doc); err != nil {
		return nil // not a JSON object: stored as sent
	}
	for _, p := range k.paths {
		k.mask(doc, p)
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	m.SetBody(body)
	m.SetProperty("MASKED", "true")
	return nil
}

// mask replaces the value at path in doc.
func (k *masker) mask(doc map[string]any, path []string) {
	for _, p := range path[:len(path)-1] {
		next, ok := doc[p].(map[string]any)
		if !ok {
			return
		}
		doc = next
	}
	last := path[len(path)-1]
	v, ok := doc[last]
	if !ok {
		return
	}
	s, isString := v.(string)
	if !isString {
		doc[last] = "****"
		return
	}
	n := utf8.RuneCountInString(s)
	keep := min(k.keep, n)
	tail := s
	for range n - keep {
		_, size := utf8.DecodeRuneInString(tail)
		tail = tail[size:]
	}
	doc[last] = strings.Repeat("*", n-keep) + tail
}

func init() {
	sdk.SetVersion("jsonmask/1")
	sdk.RegisterTransform(&masker{})
	// Self-tests the broker replays at every load; Init adds the one that
	// depends on the fields.
	sdk.AddTransformTest(sdk.TransformTest{Name: "a body that is not JSON passes",
		Message: sdk.TestMessage{Topic: "T", Body: []byte("card 4111111111111111")}})
}

func main() {}
