package main

import (
	"context"
	"testing"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
	"github.com/rmq-go/rmq/plugins/wasm"
	"github.com/rmq-go/rmq/sdk"
)

const testConfig = `{"fields": ["card", "customer.email"], "keep": 4}`

// TestNative runs the transform in the test process through the sdk.
func TestNative(t *testing.T) {
	if err := sdk.InitForTest([]byte(testConfig)); err != nil {
		t.Fatal(err)
	}
	o, err := sdk.TransformForTest("Payments", map[string]string{"TAGS": "t"},
		[]byte(`{"card":"4111111111111111","customer":{"email":"a@b.c","name":"Ann"},"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"card":"************1111","customer":{"email":"*@b.c","name":"Ann"},"n":1}`
	if !o.Changed || string(o.Body) != want || o.Properties["MASKED"] != "true" || o.Properties["TAGS"] != "t" {
		t.Errorf("got %+v (body %s), want body %s", o, o.Body, want)
	}
	o, err = sdk.TransformForTest("Payments", nil, []byte(`{"other":1}`))
	if err != nil || o.Changed {
		t.Errorf("body without the fields: %+v, %v; want unchanged", o, err)
	}
}

// TestModule builds the module and runs it in the broker's host.
func TestModule(t *testing.T) {
	p, err := wasm.Load(context.Background(), wasm.Options{Name: "mask", Kind: wasm.KindTransform,
		Module: guestbuild.Module(t, "."), Config: []byte(testConfig)})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	if n := p.Stats().SelfTests; n != 2 {
		t.Errorf("%d self-tests passed at load, want 2", n)
	}
	msgs := []wasm.TransformMessage{
		{Topic: "Payments", Properties: message.EncodeProperties(map[string]string{"KEYS": "k1"}), Body: []byte(`{"card":"4111111111111111"}`)},
		{Topic: "Payments", Body: []byte(`{"id":"x"}`)},
	}
	out := make([]wasm.TransformResult, len(msgs))
	if err := p.Transform(context.Background(), msgs, out); err != nil {
		t.Fatal(err)
	}
	if string(out[0].Body) != `{"card":"************1111"}` || out[0].Properties.Get("MASKED") != "true" || out[0].Properties.Get("KEYS") != "k1" {
		t.Errorf("masked message: %+v (body %s)", out[0], out[0].Body)
	}
	if out[1].Changed() || out[1].Reject {
		t.Errorf("message without the field: %+v, want unchanged", out[1])
	}
}

// TestSelfTests runs the module's self-tests natively for configs that
// keep none, some or all of the value, and nested fields.
func TestSelfTests(t *testing.T) {
	for _, config := range []string{testConfig, `{"fields": ["customer.email"]}`, `{"fields": ["card"], "keep": 12}`} {
		if err := sdk.InitForTest([]byte(config)); err != nil {
			t.Fatal(err)
		}
		if err := sdk.CheckSelfTests(); err != nil {
			t.Errorf("%s: %v", config, err)
		}
	}
}
