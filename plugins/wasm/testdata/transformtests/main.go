// Command transformtests is a transform with self-tests: a message tagged
// audit goes to the topic Audit with CHECKED=true, one tagged bad is
// rejected, one tagged secret gets the body "****", and the rest pass. Its
// config picks the tests it registers: "good" adds correct ones, and each
// other config one wrong test of that name.
package main

import (
	"fmt"

	"github.com/rmq-go/rmq/sdk"
)

type transform struct{}

func (transform) Transform(m *sdk.TransformMessage) error {
	switch m.Tags() {
	case "audit":
		m.SetTopic("Audit")
		m.SetProperty("CHECKED", "true")
	case "bad":
		m.Reject("tag bad is not allowed")
	case "secret":
		m.SetBody([]byte("****"))
	}
	return nil
}

func (transform) Init(config []byte) error {
	audit := sdk.TestMessage{Topic: "Orders", Tags: "audit", Properties: map[string]string{"id": "1"}}
	tests := map[string][]sdk.TransformTest{
		"good": {
			{Name: "plain passes", Message: sdk.TestMessage{Topic: "Orders", Tags: "plain", Body: []byte("{}")}},
			{Name: "audit reroutes", Message: audit, Want: sdk.TransformWant{Topic: "Audit",
				Properties: map[string]string{"TAGS": "audit", "id": "1", "CHECKED": "true"}}},
			{Name: "secret masked", Message: sdk.TestMessage{Topic: "Orders", Tags: "secret", Body: []byte("card")}, Want: sdk.TransformWant{Body: []byte("****")}},
			{Name: "bad rejected", Message: sdk.TestMessage{Topic: "Orders", Tags: "bad"}, Want: sdk.TransformWant{Reject: true, Reason: "not allowed"}},
		},
		"wrong-topic":  {{Name: "wrong-topic", Message: audit, Want: sdk.TransformWant{Topic: "Orders2"}}},
		"wrong-pass":   {{Name: "wrong-pass", Message: audit}},
		"wrong-reason": {{Name: "wrong-reason", Message: sdk.TestMessage{Topic: "Orders", Tags: "bad"}, Want: sdk.TransformWant{Reject: true, Reason: "too large"}}},
		"wrong-stored": {{Name: "wrong-stored", Message: sdk.TestMessage{Topic: "Orders", Tags: "bad"}}},
		"wrong-body":   {{Name: "wrong-body", Message: sdk.TestMessage{Topic: "Orders", Tags: "secret", Body: []byte("card")}, Want: sdk.TransformWant{Body: []byte("xxxx")}}},
	}
	ts, ok := tests[string(config)]
	if !ok {
		return fmt.Errorf("no tests named %q", config)
	}
	for _, t := range ts {
		sdk.AddTransformTest(t)
	}
	return nil
}

func init() {
	sdk.RegisterTransform(transform{})
	sdk.SetVersion("1.0.0")
}

func main() {}
