package clientframes

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	f, err := Parse("x/cpp/HEART_BEAT.v2.txtar", []byte("From a class.\n-- header --\n{\"code\":34}\n\n-- body.hex --\n# two bytes\n0a 0b\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Client != "cpp" || f.Name != "HEART_BEAT" || f.Variant != "v2" || f.Comment != "From a class." || f.String() != "cpp/HEART_BEAT.v2" {
		t.Errorf("names: %+v", f)
	}
	if string(f.Header) != "{\"code\":34}\n" || string(f.Body) != "\x0a\x0b" {
		t.Errorf("header %q, body %q", f.Header, f.Body)
	}
	if w := f.Wire(); len(w) != 4+4+len(f.Header)+2 || w[3] != byte(4+len(f.Header)+2) || w[4] != 0 || w[7] != byte(len(f.Header)) {
		t.Errorf("wire % x", w)
	}
	for name, in := range map[string]string{
		"no comment":      "-- header --\n{}\n",
		"no header":       "c\n-- body --\n{}\n",
		"unknown section": "c\n-- header --\n{}\n-- extra --\n",
		"two bodies":      "c\n-- header --\n{}\n-- body --\n{}\n-- body.hex --\n00\n",
		"bad hex":         "c\n-- header --\n{}\n-- body.hex --\nzz\n",
	} {
		if _, err := Parse("java/HEART_BEAT.txtar", []byte(in)); !errors.Is(err, ErrBadFile) {
			t.Errorf("%s: %v, want ErrBadFile", name, err)
		}
	}
}
