package lint

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSDKModule holds the plugin SDK to being a module an author can
// require on its own: it depends on nothing (go list -m all names just the
// sdk), and its own vet and tests pass when run inside it, outside the
// broker's module, as they would in an author's checkout. The root's
// `go test ./...` does not reach a nested module, so this is where the
// sdk's tests run.
func TestSDKModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests the sdk module")
	}
	dir, err := filepath.Abs("../../sdk")
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s in sdk: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out)
	}
	if mods := strings.Fields(run("list", "-m", "all")); len(mods) != 1 || mods[0] != module+"/sdk" {
		t.Fatalf("the sdk module depends on %q; it must need only the standard library", mods)
	}
	run("vet", "./...")
	args := []string{"test", "-count=1"}
	if raceEnabled {
		args = append(args, "-race")
	}
	run(append(args, "./...")...)
	// The exports compile only for guests.
	cmd := exec.Command("go", "vet", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("GOOS=wasip1 go vet in sdk: %v\n%s", err, out)
	}
}
