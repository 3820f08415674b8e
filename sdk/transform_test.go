package sdk

import (
	"errors"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/sdk/abi"
)

// TestTransformEdits checks the TransformMessage setters: each change is
// seen by the getters at once and reaches the result, and a message left
// alone passes as 0 (no result).
func TestTransformEdits(t *testing.T) {
	reset(t)
	RegisterTransform(TransformFunc(func(m *TransformMessage) error {
		switch string(m.Body()) {
		case "edit":
			m.SetTags("new")
			m.SetKeys("k1 k2")
			m.DeleteProperty("drop")
			m.SetProperty("bad\x01key", "x") // ignored
			m.SetProperty("add", "v")
			m.SetTopic("Other")
			m.SetBody([]byte("edited"))
			if m.Tags() != "new" || m.Topic() != "Other" || string(m.Body()) != "edited" || m.Properties().Get("drop") != "" {
				return errors.New("getters do not see the edits")
			}
		case "reject":
			m.Reject(strings.Repeat("r", abi.MaxErrorLen+10))
		case "fail":
			return errors.New("cannot")
		}
		return nil
	}))
	if k := kinds(); !k.Has(abi.KindTransform) {
		t.Fatalf("kinds %v lack transform", k)
	}
	o, err := TransformForTest("T", map[string]string{"TAGS": "old", "drop": "me", "keep": "1"}, []byte("edit"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"TAGS": "new", "KEYS": "k1 k2", "keep": "1", "add": "v"}
	if !o.Changed || o.Topic != "Other" || string(o.Body) != "edited" || len(o.Properties) != len(want) {
		t.Fatalf("edited: %+v", o)
	}
	for k, v := range want {
		if o.Properties[k] != v {
			t.Errorf("property %s = %q, want %q", k, o.Properties[k], v)
		}
	}
	if o, err = TransformForTest("T", nil, []byte("pass")); err != nil || o.Changed || o.Rejected {
		t.Errorf("untouched: %+v, %v", o, err)
	}
	if o, err = TransformForTest("T", nil, []byte("reject")); err != nil || !o.Rejected || len(o.Reason) != abi.MaxErrorLen {
		t.Errorf("reject: %+v, %v; want a reason cut to %d bytes", o, err, abi.MaxErrorLen)
	}
	if _, err = TransformForTest("T", nil, []byte("fail")); err == nil || !strings.Contains(err.Error(), "cannot") {
		t.Errorf("fail: %v", err)
	}
}
