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

// maskCases are the Go jsonmask example's assertions: masked fields keep
// their last four characters and the message gains MASKED=true, other
// properties stay, a body without the fields passes unchanged.
var maskCases = []struct {
	in        wasm.TransformMessage
	body      string // "" : unchanged
	wantProps map[string]string
}{
	{wasm.TransformMessage{Topic: "Payments", Properties: message.EncodeProperties(map[string]string{"KEYS": "k1"}), Body: []byte(`{"card":"4111111111111111"}`)},
		`{"card":"************1111"}`, map[string]string{"MASKED": "true", "KEYS": "k1"}},
	{wasm.TransformMessage{Topic: "Payments", Body: []byte(`{"id":"x"}`)}, "", nil},
	{wasm.TransformMessage{Topic: "Payments", Properties: message.EncodeProperties(map[string]string{"TAGS": "t"}),
		Body: []byte(`{"card":"4111111111111111","customer":{"email":"a@b.c","name":"Ann"},"n":1}`)},
		`{"card":"************1111","customer":{"email":"*@b.c","name":"Ann"},"n":1}`, map[string]string{"MASKED": "true", "TAGS": "t"}},
}

// checkMasks runs maskCases through p.
func checkMasks(t *testing.T, p *wasm.Plugin) {
	t.Helper()
	msgs := make([]wasm.TransformMessage, len(maskCases))
	for i, c := range maskCases {
		msgs[i] = c.in
	}
	out := make([]wasm.TransformResult, len(msgs))
	if err := p.Transform(t.Context(), msgs, out); err != nil {
		t.Fatal(err)
	}
	for i, c := range maskCases {
		o := out[i]
		if c.body == "" {
			if o.Changed() || o.Reject {
				t.Errorf("message %d: %+v, want unchanged", i, o)
			}
			continue
		}
		if o.Reject || string(o.Body) != c.body {
			t.Errorf("message %d: %+v (body %s), want body %s", i, o, o.Body, c.body)
		}
		for k, v := range c.wantProps {
			if got := o.Properties.Get(k); got != v {
				t.Errorf("message %d: property %s = %q, want %q", i, k, got, v)
			}
		}
	}
}

// TestGuardMasks runs the mask assertions on the AssemblyScript guard and
// on the Go jsonmask example, both through the host.
func TestGuardMasks(t *testing.T) {
	t.Run("assemblyscript", func(t *testing.T) {
		p := loadGuard(t, "mask=card,email keep=4")
		if s := p.Stats(); s.Version != "1.0.0" || s.ABIMinor != 3 || s.SelfTests != 1 {
			t.Fatalf("version %q, ABI minor %d, %d self-tests passed at load; want 1.0.0, 3 and 1", s.Version, s.ABIMinor, s.SelfTests)
		}
		checkMasks(t, p)
		// A value with an escape is masked whole; "card" as a value is not a key.
		msgs := []wasm.TransformMessage{{Topic: "Payments", Body: []byte(`{"note":"card", "card" : "12\"345678"}`)}}
		out := make([]wasm.TransformResult, 1)
		if err := p.Transform(t.Context(), msgs, out); err != nil {
			t.Fatal(err)
		}
		if want := `{"note":"card", "card" : "**********"}`; string(out[0].Body) != want {
			t.Errorf("escaped: body %s, want %s", out[0].Body, want)
		}
	})
	t.Run("go", func(t *testing.T) {
		p, err := wasm.Load(t.Context(), wasm.Options{Name: "jsonmask", Kind: wasm.KindTransform,
			Module: guestbuild.Module(t, "../jsonmask"), Config: []byte(`{"fields": ["card", "customer.email"], "keep": 4}`),
			CacheDir: t.TempDir(), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(t.Context())
		checkMasks(t, p)
	})
}

// TestGuardRejects: a send without a required property is refused with the
// guest's reason, which the producer receives; one with it passes.
func TestGuardRejects(t *testing.T) {
	p := loadGuard(t, "require=KEYS,tenant mask=card")
	if n := p.Stats().SelfTests; n != 2 {
		t.Errorf("%d self-tests passed at load, want 2 (a missing property, a masked field)", n)
	}
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
