// Command jsonschema is a broker transform plugin: it validates JSON
// message bodies against a small schema before the broker stores them and
// rejects the send of a message that breaks it, with a reason the producer
// receives. The schema is the plugin's config, a JSON object of required
// fields and their types:
//
//	{"required": {"id": "string", "amount": "number", "paid": "boolean",
//	              "customer.name": "string", "items": "array"}}
//
// A dotted name is a nested field. The types are string, number, boolean,
// object, array and null. A body that is not a JSON object is rejected.
// Messages that pass are stored unchanged.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o jsonschema.wasm .
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rmq-go/rmq/sdk"
)

// field is one required field: its path and the type it must have.
type field struct {
	name string
	path []string
	typ  string
}

// schema is the compiled config.
type schema struct{ fields []field }

var types = []string{"string", "number", "boolean", "object", "array", "null"}

// Init compiles the config.
func (s *schema) Init(config []byte) error {
	var c struct {
		Required map[string]string `json:"required"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return fmt.Errorf("config: %v", err)
	}
	if len(c.Required) == 0 {
		return errors.New(`config: no required fields; want {"required": {"field": "type", ...}}`)
	}
	s.fields = s.fields[:0]
	for name, typ := range c.Required {
		if !slices.Contains(types, typ) {
			return fmt.Errorf("config: field %q has type %q, not one of %v", name, typ, types)
		}
		path := strings.Split(name, ".")
		if slices.Contains(path, "") {
			return fmt.Errorf("config: field %q has an empty name in its path", name)
		}
		s.fields = append(s.fields, field{name: name, path: path, typ: typ})
	}
	slices.SortFunc(s.fields, func(a, b field) int { return strings.Compare(a.name, b.name) })
	addSchemaTests(c.Required)
	return nil
}

// sample is a JSON value of each type.
var sample = map[string]any{"string": "x", "number": 1, "boolean": true, "object": map[string]any{}, "array": []any{}, "null": nil}

// addSchemaTests adds the self-tests that follow from the schema: an empty
// object lacks the first required field (by name), and a body holding
// every field with a value of its type passes. The second is left out
// when the schema cannot be met (a field inside one that is not an
// object).
func addSchemaTests(required map[string]string) {
	first := slices.Min(slices.Collect(maps.Keys(required)))
	sdk.AddTransformTest(sdk.TransformTest{
		Name:    "an empty object lacks " + first,
		Message: sdk.TestMessage{Topic: "T", Body: []byte("{}")},
		Want:    sdk.TransformWant{Reject: true, Reason: "field " + first + " is required"},
	})
	doc := map[string]any{}
	for name, typ := range required {
		if !place(doc, strings.Split(name, "."), typ) {
			return
		}
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return
	}
	sdk.AddTransformTest(sdk.TransformTest{Name: "a body with every field passes", Message: sdk.TestMessage{Topic: "T", Body: body}})
}

// place puts a sample of typ at path in doc, reporting false when the path
// runs through a field that is not an object.
func place(doc map[string]any, path []string, typ string) bool {
	for _, p := range path[:len(path)-1] {
		v, ok := doc[p]
		if !ok {
			v = map[string]any{}
			doc[p] = v
		}
		next, isObject := v.(map[string]any)
		if !isObject {
			return false
		}
		doc = next
	}
	last := path[len(path)-1]
	if v, ok := doc[last]; ok {
		// Already an object holding deeper fields: it must be an object.
		_, isObject := v.(map[string]any)
		return typ == "object" && isObject
	}
	v := sample[typ]
	if typ == "object" {
		v = map[string]any{}
	}
	doc[last] = v
	return true
}

// typeOf names the JSON type of a raw value.
func typeOf(v sdk.JSONValue) string {
	if v.IsString() {
		return "string"
	}
	raw := v.Raw()
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// Transform checks every required field; the first that is missing or of
// another type rejects the message.
func (s *schema) Transform(m *sdk.TransformMessage) error {
	body := m.Body()
	if m.Compressed() {
		m.Reject("body is compressed beyond what the broker inflates")
		return nil
	}
	if i := firstNonSpace(body); i < 0 || body[i] != '{' {
		m.Reject("body is not a JSON object")
		return nil
	}
	for _, f := range s.fields {
		v, ok := m.JSONField(f.path...)
		if !ok {
			m.Reject("field " + f.name + " is required")
			return nil
		}
		if got := typeOf(v); got != f.typ {
			m.Reject("field " + f.name + " is " + got + ", want " + f.typ)
			return nil
		}
	}
	return nil
}

func firstNonSpace(b []byte) int {
	for i, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return i
		}
	}
	return -1
}

func init() {
	sdk.SetVersion("jsonschema/1")
	sdk.RegisterTransform(&schema{})
	// Self-tests the broker replays at every load; Init adds those that
	// depend on the schema.
	sdk.AddTransformTest(sdk.TransformTest{
		Name:    "an array is not an object",
		Message: sdk.TestMessage{Topic: "T", Body: []byte(`[1, 2]`)},
		Want:    sdk.TransformWant{Reject: true, Reason: "body is not a JSON object"},
	})
}

func main() {}
