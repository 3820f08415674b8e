package rmqpb_test

import (
	"os"
	"os/exec"
	"testing"
)

// TestGenerated regenerates the code and fails if it differs from the
// committed files. It needs protoc and the network (or a module cache
// holding the generators), so it runs only where protoc is installed.
func TestGenerated(t *testing.T) {
	if _, err := exec.LookPath("protoc"); err != nil {
		t.Skip("protoc not installed")
	}
	if testing.Short() {
		t.Skip("builds the generators")
	}
	cmd := exec.Command("sh", "generate.sh", "-check")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("generate.sh -check: %v", err)
	}
}
