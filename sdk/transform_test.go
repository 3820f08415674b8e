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

// TestTransformSelfTests checks that transform self-tests compare
// outcomes: each kind of expectation passes when the transform does what
// it says, and each wrong one is reported under its name.
func TestTransformSelfTests(t *testing.T) {
	reset(t)
	RegisterTransform(TransformFunc(func(m *TransformMessage) error {
		switch m.Tags() {
		case "audit":
			m.SetTopic("Audit")
			m.SetProperty("CHECKED", "true")
		case "secret":
			m.SetBody([]byte("****"))
		case "bad":
			m.Reject("tag bad is not allowed")
		case "same":
			m.SetTags("same") // a change that changes nothing
		}
		return nil
	}))
	good := []TransformTest{
		{Name: "pass", Message: TestMessage{Topic: "Orders", Tags: "plain", Body: []byte("{}")}},
		{Name: "same", Message: TestMessage{Topic: "Orders", Tags: "same"}},
		{Name: "reroute", Message: TestMessage{Topic: "Orders", Tags: "audit", Properties: map[string]string{"a": "1"}},
			Want: TransformWant{Topic: "Audit", Properties: map[string]string{"TAGS": "audit", "CHECKED": "true", "a": "1"}}},
		{Name: "mask", Message: TestMessage{Topic: "Orders", Tags: "secret", Body: []byte("card")}, Want: TransformWant{Body: []byte("****")}},
		{Name: "reject", Message: TestMessage{Topic: "Orders", Tags: "bad"}, Want: TransformWant{Reject: true, Reason: "not allowed"}},
	}
	for _, tt := range good {
		AddTransformTest(tt)
	}
	if err := CheckSelfTests(); err != nil {
		t.Fatalf("good tests: %v", err)
	}
	bad := []struct {
		test TransformTest
		want string
	}{
		{TransformTest{Name: "w-pass", Message: TestMessage{Topic: "Orders", Tags: "secret", Body: []byte("card")}}, `body "****", want "card"`},
		{TransformTest{Name: "w-topic", Message: TestMessage{Topic: "Orders", Tags: "audit"}, Want: TransformWant{Topic: "Other", Tags: "audit"}}, `topic "Audit", want "Other"`},
		{TransformTest{Name: "w-props", Message: TestMessage{Topic: "Orders", Tags: "audit"}, Want: TransformWant{Topic: "Audit"}}, `properties {CHECKED="true", TAGS="audit"}, want {TAGS="audit"}`},
		{TransformTest{Name: "w-tags", Message: TestMessage{Topic: "Orders", Tags: "plain"}, Want: TransformWant{Tags: "other"}}, `properties {TAGS="plain"}, want {TAGS="other"}`},
		{TransformTest{Name: "w-reason", Message: TestMessage{Topic: "Orders", Tags: "bad"}, Want: TransformWant{Reject: true, Reason: "too big"}}, `rejected with "tag bad is not allowed", want a reason containing "too big"`},
		{TransformTest{Name: "w-stored", Message: TestMessage{Topic: "Orders", Tags: "plain"}, Want: TransformWant{Reject: true}}, `stored, want it rejected`},
		{TransformTest{Name: "w-rejected", Message: TestMessage{Topic: "Orders", Tags: "bad"}}, `rejected with "tag bad is not allowed", want the message stored`},
	}
	for _, b := range bad {
		state.transformTests = nil
		AddTransformTest(b.test)
		err := CheckSelfTests()
		if err == nil || !strings.Contains(err.Error(), `"`+b.test.Name+`"`) || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: %v, want an error naming it and saying %s", b.test.Name, err, b.want)
		}
	}
	// An unnamed test is named by its position.
	state.transformTests = nil
	AddTransformTest(TransformTest{Message: TestMessage{Tags: "plain"}})
	AddTransformTest(TransformTest{Message: TestMessage{Tags: "bad"}})
	if err := CheckSelfTests(); err == nil || !strings.Contains(err.Error(), `"#2"`) {
		t.Errorf("unnamed: %v, want it named #2", err)
	}
}

// initTests is a transform whose Init adds a self-test named by its config.
type initTests struct{}

func (initTests) Transform(*TransformMessage) error { return nil }
func (initTests) Init(config []byte) error {
	AddTransformTest(TransformTest{Name: string(config), Message: TestMessage{Topic: "T"}})
	return nil
}

// TestInitTestsReplaced checks that the tests an Init adds replace those
// of the Init before, and that tests from init functions stay.
func TestInitTestsReplaced(t *testing.T) {
	reset(t)
	RegisterTransform(initTests{})
	AddTransformTest(TransformTest{Name: "static", Message: TestMessage{Topic: "T"}})
	for _, config := range []string{"first", "second"} {
		if err := InitForTest([]byte(config)); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, tt := range state.transformTests {
		names = append(names, tt.Name)
	}
	if strings.Join(names, ",") != "static,second" {
		t.Errorf("tests %v after two Inits, want [static second]", names)
	}
}
