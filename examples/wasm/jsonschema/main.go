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
	return nil
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
}

func main() {}
