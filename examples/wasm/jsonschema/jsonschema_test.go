package main

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"testing"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
	"github.com/rmq-go/rmq/plugins/wasm"
	"github.com/rmq-go/rmq/sdk"
)

const testSchema = `{"required": {"id": "string", "amount": "number", "customer.name": "string"}}`

var cases = []struct {
	body   string
	reason string // "" passes
}{
	{`{"id":"a1","amount":12.5,"customer":{"name":"Ann"}}`, ""},
	{`{"amount":1,"customer":{"name":"Ann"}}`, "field id is required"},
	{`{"id":"a1","amount":"12","customer":{"name":"Ann"}}`, "field amount is string, want number"},
	{`{"id":"a1","amount":1,"customer":{}}`, "field customer.name is required"},
	{`[1,2]`, "body is not a JSON object"},
	{`not json`, "body is not a JSON object"},
}

// TestNative runs the transform in the test process through the sdk.
func TestNative(t *testing.T) {
	if err := sdk.InitForTest([]byte(testSchema)); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		o, err := sdk.TransformForTest("Orders", map[string]string{"TAGS": "t"}, []byte(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if o.Rejected != (c.reason != "") || o.Reason != c.reason || o.Changed {
			t.Errorf("%s: got %+v, want reason %q", c.body, o, c.reason)
		}
	}
}

// TestModule builds the module and runs it in the broker's host, with a
// compressed body among the messages.
func TestModule(t *testing.T) {
	p, err := wasm.Load(context.Background(), wasm.Options{Name: "schema", Kind: wasm.KindTransform,
		Module: guestbuild.Module(t, "."), Config: []byte(testSchema)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if n := p.Stats().SelfTests; n != 3 {
		t.Errorf("%d self-tests passed at load, want 3", n)
	}
	var msgs []wasm.TransformMessage
	for _, c := range cases {
		msgs = append(msgs, wasm.TransformMessage{Topic: "Orders", Body: []byte(c.body)})
	}
	for i, c := range cases {
		out := make([]wasm.TransformResult, 1)
		if err := p.Transform(context.Background(), msgs[i:i+1], out); err != nil {
			t.Fatal(err)
		}
		if out[0].Reject != (c.reason != "") || out[0].Reason != c.reason || out[0].Changed() {
			t.Errorf("%s: got %+v, want reason %q", c.body, out[0], c.reason)
		}
	}
	// A batch stops at its first bad message.
	out := make([]wasm.TransformResult, len(msgs))
	if err := p.Transform(context.Background(), msgs, out); err != nil {
		t.Fatal(err)
	}
	if out[0].Reject || !out[1].Reject || out[2].Reject {
		t.Errorf("batch results %+v: want the second rejected and nothing after it", out)
	}
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write([]byte(cases[0].body))
	w.Close()
	comp := []wasm.TransformMessage{{Topic: "Orders", SysFlag: message.SysFlagCompressed, Body: z.Bytes()}}
	if err := p.Transform(context.Background(), comp, out[:1]); err != nil || out[0].Reject {
		t.Errorf("compressed valid body: %+v, %v", out[0], err)
	}
	if st := p.Stats(); st.Rejected != 6 || st.Kind != wasm.KindTransform {
		t.Errorf("stats %+v: want 6 rejected (5 alone, 1 in the batch)", st)
	}
	_, err = wasm.Load(context.Background(), wasm.Options{Name: "bad", Kind: wasm.KindTransform,
		Module: guestbuild.Module(t, "."), Config: []byte(`{"required":{"x":"date"}}`)})
	if !errors.Is(err, wasm.ErrInit) {
		t.Errorf("load with a bad schema: %v, want ErrInit", err)
	}
}

// TestSelfTests runs the module's self-tests natively for several schemas:
// nested fields, every type, and one that cannot be met (which leaves out
// the test of a passing body).
func TestSelfTests(t *testing.T) {
	for _, schema := range []string{
		testSchema,
		`{"required": {"a": "string", "b": "number", "c": "boolean", "d": "object", "d.e": "null", "f": "array"}}`,
		`{"required": {"x": "string", "x.y": "number"}}`,
	} {
		if err := sdk.InitForTest([]byte(schema)); err != nil {
			t.Fatal(err)
		}
		if err := sdk.CheckSelfTests(); err != nil {
			t.Errorf("%s: %v", schema, err)
		}
	}
}
