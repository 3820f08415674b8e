package wasm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/plugins/wasm"
	"github.com/rmq-go/rmq/sdk/abi"
)

// TestTransformOutputChecked has a guest break the transform layout three
// ways: each is ErrOutput under PolicyReject and a pass under PolicyPass,
// and the instance keeps serving.
func TestTransformOutputChecked(t *testing.T) {
	for _, policy := range []wasm.Policy{wasm.PolicyReject, wasm.PolicyPass} {
		p, err := wasm.Load(ctx(t), wasm.Options{Name: "bad-" + string(policy), Kind: wasm.KindTransform,
			Path: guest(t, "badtransform"), CacheDir: cacheDir, FailurePolicy: policy})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx(t))
		out := make([]wasm.TransformResult, 2)
		for _, body := range []string{"short", "range", "reject-change"} {
			msgs := []wasm.TransformMessage{{Topic: "T", Body: []byte("fine")}, {Topic: "T", Body: []byte(body)}}
			err := p.Transform(ctx(t), msgs, out)
			switch policy {
			case wasm.PolicyReject:
				if !errors.Is(err, wasm.ErrOutput) {
					t.Errorf("%s under reject: %v, want ErrOutput", body, err)
				}
			case wasm.PolicyPass:
				if err != nil || out[0].Changed() || out[1].Changed() || out[1].Reject {
					t.Errorf("%s under pass: %+v, %v; want both messages as sent", body, out, err)
				}
			}
		}
		if err := p.Transform(ctx(t), []wasm.TransformMessage{{Topic: "T", Body: []byte("fine")}}, out[:1]); err != nil {
			t.Errorf("a good message after the bad ones: %v", err)
		}
		if s := p.Stats(); s.Errors != 3 || s.Traps != 0 || s.Disabled {
			t.Errorf("stats %+v: want 3 errors, no traps", s)
		}
	}
}

// TestOlderMinorLoads loads a filter built for ABI v1.1 (before
// transforms) into this host: it serves as a filter, and is refused as a
// transform for lacking the export, not for its version.
func TestOlderMinorLoads(t *testing.T) {
	p, err := wasm.Load(ctx(t), wasm.Options{Name: "old", Kind: wasm.KindFilter, Path: guest(t, "abiold"), CacheDir: cacheDir})
	if err != nil {
		t.Fatalf("a v1.1 filter: %v", err)
	}
	defer p.Close(ctx(t))
	if s := p.Stats(); s.ABIMinor != 1 {
		t.Errorf("ABI minor %d, want 1", s.ABIMinor)
	}
	got, err := match(t, p, "x", []message.Record{record(t, "A", 0, []byte("b"))})
	if err != nil || !got[0] {
		t.Errorf("match: %v, %v", got, err)
	}
	_, err = wasm.Load(ctx(t), wasm.Options{Name: "old-t", Kind: wasm.KindTransform, Path: guest(t, "abiold"), CacheDir: cacheDir})
	if !errors.Is(err, wasm.ErrKind) || errors.Is(err, wasm.ErrABIVersion) {
		t.Errorf("a v1.1 module as a transform: %v, want ErrKind", err)
	}
}

// TestTransformClosedFollowsPolicy calls a transform after its plugin was
// closed, as a send does that looked its transforms up just before a
// reload removed one: under pass the message goes on as sent, under
// reject the send is refused (a closed validator lets nothing through).
func TestTransformClosedFollowsPolicy(t *testing.T) {
	for _, policy := range []wasm.Policy{wasm.PolicyReject, wasm.PolicyPass} {
		p, err := wasm.Load(ctx(t), wasm.Options{Name: "closed-" + string(policy), Kind: wasm.KindTransform,
			Path: guest(t, "badtransform"), CacheDir: cacheDir, FailurePolicy: policy})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Close(ctx(t)); err != nil {
			t.Fatal(err)
		}
		out := make([]wasm.TransformResult, 1)
		err = p.Transform(ctx(t), []wasm.TransformMessage{{Topic: "T", Body: []byte("fine")}}, out)
		switch policy {
		case wasm.PolicyReject:
			if !errors.Is(err, wasm.ErrClosed) {
				t.Errorf("closed, under reject: %v, want ErrClosed", err)
			}
		case wasm.PolicyPass:
			if err != nil || out[0].Changed() || out[0].Reject {
				t.Errorf("closed, under pass: %+v, %v; want the message as sent", out[0], err)
			}
		}
	}
}

// TestTransformSelfTests loads a transform whose self-tests hold (it
// loads, and serves as they say) and, one at a time, tests that are wrong
// about a topic, a pass, a reason, a store or a body: each refuses the
// module with ErrSelfTest naming the test.
func TestTransformSelfTests(t *testing.T) {
	path := guest(t, "transformtests")
	p, err := wasm.Load(ctx(t), wasm.Options{Name: "checked", Kind: wasm.KindTransform, Path: path, CacheDir: cacheDir, Config: []byte("good")})
	if err != nil {
		t.Fatalf("correct self-tests: %v", err)
	}
	defer p.Close(ctx(t))
	if s := p.Stats(); s.ABIMinor != abi.Minor {
		t.Errorf("ABI minor %d, want the SDK's, %d", s.ABIMinor, abi.Minor)
	}
	out := make([]wasm.TransformResult, 1)
	if err := p.Transform(ctx(t), []wasm.TransformMessage{{Topic: "Orders", Properties: message.EncodeProperties(map[string]string{"TAGS": "audit"})}}, out); err != nil || out[0].Topic != "Audit" {
		t.Errorf("audit: %+v, %v", out[0], err)
	}
	for name, want := range map[string]string{
		"wrong-topic":  `topic "Audit", want "Orders2"`,
		"wrong-pass":   `topic "Audit", want "Orders"`,
		"wrong-reason": `want a reason containing "too large"`,
		"wrong-stored": `rejected with "tag bad is not allowed", want the message stored`,
		"wrong-body":   `body "****", want "xxxx"`,
	} {
		_, err := wasm.Load(ctx(t), wasm.Options{Name: name, Kind: wasm.KindTransform, Path: path, CacheDir: cacheDir, Config: []byte(name)})
		if !errors.Is(err, wasm.ErrSelfTest) || !strings.Contains(err.Error(), `transform test "`+name+`"`) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrSelfTest naming the test and saying %s", name, err, want)
		}
	}
}
