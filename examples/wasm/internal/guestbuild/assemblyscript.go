package guestbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ASFlags are the asc options an AssemblyScript plugin is built with: an
// optimized module with the incremental collector, and abort turned into a
// trap so the module imports nothing outside broker_v1 (docs/plugins.md,
// "AssemblyScript plugins").
var ASFlags = []string{"-O3", "--runtime", "incremental", "--use", "abort="}

// AssemblyScript builds the AssemblyScript entry file entry with the asc of
// sdkDir (the SDK's directory, where npm ci installed its locked
// assemblyscript), once per test process, and returns the module's bytes.
// extra flags follow ASFlags. Without node or the SDK's node_modules the
// test is skipped, unless RMQ_REQUIRE_NODE=1 (as .ci/run sets) makes it
// fail.
func AssemblyScript(tb testing.TB, sdkDir, entry string, extra ...string) []byte {
	tb.Helper()
	sdkDir, err := filepath.Abs(sdkDir)
	if err != nil {
		tb.Fatal(err)
	}
	node, err := exec.LookPath("node")
	asc := filepath.Join(sdkDir, "node_modules", "assemblyscript", "bin", "asc.js")
	_, ascErr := os.Stat(asc)
	if err != nil || ascErr != nil {
		if os.Getenv("RMQ_REQUIRE_NODE") == "1" {
			tb.Fatalf("node or %s missing (run npm ci in %s): %v %v", asc, sdkDir, err, ascErr)
		}
		tb.Skipf("node or the AssemblyScript compiler missing: run npm ci in %s (%v %v)", sdkDir, err, ascErr)
	}
	abs, err := filepath.Abs(entry)
	if err != nil {
		tb.Fatal(err)
	}
	key := fmt.Sprint("asc:", abs, extra)
	mu.Lock()
	r := built[key]
	if r == nil {
		r = &result{}
		built[key] = r
	}
	mu.Unlock()
	r.once.Do(func() { r.bin, r.err = buildAS(node, asc, abs, extra) })
	if r.err != nil {
		tb.Fatal(r.err)
	}
	return r.bin
}

func buildAS(node, asc, entry string, extra []string) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "guestbuild-as-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "plugin.wasm")
	args := append([]string{asc, entry}, ASFlags...)
	args = append(append(args, extra...), "-o", out)
	cmd := exec.Command(node, args...)
	cmd.Dir = filepath.Dir(entry)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("asc %s: %v\n%s", entry, err, msg)
	}
	return os.ReadFile(out)
}
