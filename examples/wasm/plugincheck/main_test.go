package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
)

func TestRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jsonfield.wasm")
	if err := os.WriteFile(path, guestbuild.Module(t, "../jsonfield"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if code := run([]string{"-expr", "region=eu", path}, &out, &errs); code != 0 {
		t.Fatalf("exit %d: %s", code, errs.String())
	}
	for _, want := range []string{`expression "region=eu": ok`, `plugin "jsonfield": kind filter, ABI v1, version 1.0.0`} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	errs.Reset()
	if code := run([]string{"-expr", "region", path}, &out, &errs); code != 1 || !strings.Contains(errs.String(), `plugin "jsonfield"`) {
		t.Fatalf("bad expression: exit %d, %s", code, errs.String())
	}
	errs.Reset()
	if code := run([]string{"-kind", "allocate", path}, &out, &errs); code != 1 || !strings.Contains(errs.String(), "kind not served") {
		t.Fatalf("wrong kind: exit %d, %s", code, errs.String())
	}
	if code := run(nil, &out, &errs); code != 2 {
		t.Fatalf("no module: exit %d", code)
	}
}
