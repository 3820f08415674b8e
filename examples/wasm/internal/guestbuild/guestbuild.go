package guestbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	mu    sync.Mutex
	built = map[string]*result{} // absolute package dir, or asc and entry file → result
)

type result struct {
	once sync.Once
	bin  []byte
	err  error
}

// Module builds the main package in dir with GOOS=wasip1 GOARCH=wasm go
// build -buildmode=c-shared, once per test process, and returns the
// module's bytes. The build output goes to a temporary directory that is
// removed at once; no .wasm file is left behind.
func Module(tb testing.TB, dir string) []byte {
	tb.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		tb.Fatal(err)
	}
	mu.Lock()
	r := built[abs]
	if r == nil {
		r = &result{}
		built[abs] = r
	}
	mu.Unlock()
	r.once.Do(func() { r.bin, r.err = build(abs) })
	if r.err != nil {
		tb.Fatal(r.err)
	}
	return r.bin
}

func build(dir string) ([]byte, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "guestbuild-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "plugin.wasm")
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("building %s: %v\n%s", dir, err, msg)
	}
	return os.ReadFile(out)
}
