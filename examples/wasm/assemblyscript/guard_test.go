package assemblyscript_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
	"github.com/rmq-go/rmq/plugins/wasm"
)

func loadGuard(t *testing.T, config string) *wasm.Plugin {
	t.Helper()
	p, err := wasm.Load(t.Context(), wasm.Options{Name: "guard", Kind: wasm.KindTransform,
		Module: guestbuild.AssemblyScript(t, sdkDir, "guard/index.ts"), Config: []byte(config), CacheDir: t.TempDir(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close(t.Context()) })
	return p
}

// TestGuardMasks makes the assertions of the Go jsonmask example's tests
// (masked fields keep their last four characters and gain MASKED=true,
// other properties stay, a body without the fields passes unchanged).
func TestGuardMasks(t *testing.T) {
	p := loadGuard(t, "mask=card,email keep=4")
	if s := p.Stats(); s.Version != "1.0.0" {
		t.Fatalf("version %q", s.Version)
	}
	msgs := []wasm.TransformMessage{
		{Topic: "Payments", Properties: message.EncodeProperties(map[string]string{"KEYS": "k1"}), Body: []byte(`{"card":"4111111111111111"}`)},
		{Topic: "Payments", Body: []byte(`{"id":"x"}`)},
		{Topic: "Payments", Properties: message.EncodeProperties(map[string]string{"TAGS": "t"}),
			Body: []byte(`{"card":"4111111111111111","customer":{"email":"a@b.c","name":"Ann"},"n":1}`)},
		{Topic: "Payments", Body: []byte(`{"note":"card", "card" : "12\"345678"}`)},
	}
	out := make([]wasm.TransformResult, len(msgs))
	if err := p.Transform(t.Context(), msgs, out); err != nil {
		t.Fatal(err)
	}
	if string(out[0].Body) != `{"card":"************1111"}` || out[0].Properties.Get("MASKED") != "true" || out[0].Properties.Get("KEYS") != "k1" {
		t.Errorf("masked message: %+v (body %s)", out[0], out[0].Body)
	}
	if out[1].Changed() || out[1].Reject {
		t.Errorf("message without the field: %+v, want unchanged", out[1])
	}
	if want := `{"card":"************1111","customer":{"email":"*@b.c","name":"Ann"},"n":1}`; string(out[2].Body) != want ||
		out[2].Properties.Get("TAGS") != "t" || out[2].Properties.Get("MASKED") != "true" {
		t.Errorf("nested: %+v (body %s), want body %s", out[2], out[2].Body, want)
	}
	// A value with an escape is masked whole; "card" as a value is not a key.
	if want := `{"note":"card", "card" : "**********"}`; string(out[3].Body) != want {
		t.Errorf("escaped: body %s, want %s", out[3].Body, want)
	}
}

// TestGuardRejects: a send without a required property is refused with the
// guest's reason, which the producer receives; one with it passes.
func TestGuardRejects(t *testing.T) {
	p := loadGuard(t, "require=KEYS,tenant mask=card")
	msgs := []wasm.TransformMessage{
		{Topic: "Orders", Properties: message.EncodeProperties(map[string]string{"KEYS": "k1"}), Body: []byte(`{}`)},
		{Topic: "Orders", Properties: message.EncodeProperties(map[string]string{"KEYS": "k1", "tenant": "acme"}), Body: []byte(`{"id":1}`)},
	}
	out := make([]wasm.TransformResult, len(msgs))
	if err := p.Transform(t.Context(), msgs, out); err != nil {
		t.Fatal(err)
	}
	if !out[0].Reject || out[0].Reason != "missing property tenant" {
		t.Errorf("without tenant: %+v, want rejected for the missing property", out[0])
	}
	if out[1].Reject || out[1].Changed() {
		t.Errorf("with both: %+v, want unchanged", out[1])
	}
}

// TestGuardBadConfig: a config the guest refuses fails the load with its
// reason.
func TestGuardBadConfig(t *testing.T) {
	_, err := wasm.Load(t.Context(), wasm.Options{Name: "guard", Kind: wasm.KindTransform,
		Module: guestbuild.AssemblyScript(t, sdkDir, "guard/index.ts"), Config: []byte("keep=many"), CacheDir: t.TempDir(), Logger: quiet})
	if !errors.Is(err, wasm.ErrInit) || !strings.Contains(err.Error(), "bad keep 'many'") {
		t.Fatalf("err = %v, want ErrInit with the guest's reason", err)
	}
}
