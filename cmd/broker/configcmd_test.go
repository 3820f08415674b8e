package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/internal/server"
)

// TestConfigCheckCommand runs "broker config check" on a file with
// several problems and on a good one.
func TestConfigCheckCommand(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(bad, []byte("listen: 127.0.0.1:0\nbrokerNmae: x\nstore:\n  diskHighWater: 3\nmaxGroups: lots\n"), 0o644)
	os.WriteFile(good, []byte("listen: 127.0.0.1:0\nstore: {flush: async}\n"), 0o644)

	var out, errOut bytes.Buffer
	if code := run([]string{"config", "check", bad, good}, &out, &errOut); code != 1 {
		t.Fatalf("exit %d, want 1; stdout:\n%s\nstderr:\n%s", code, &out, &errOut)
	}
	for _, want := range []string{
		bad + ": line 2: field brokerNmae not found",
		bad + ": line 5: maxGroups: cannot unmarshal",
		bad + ": store: DiskHighWater 3 is above 1",
		good + ": ok",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	out.Reset()
	if code := run([]string{"config", "check", good}, &out, &errOut); code != 0 {
		t.Fatalf("a good file: exit %d:\n%s", code, &out)
	}
}

// TestConfigDefaultsCommand checks that the printed defaults are a file
// the broker accepts, which "broker config check" passes.
func TestConfigDefaultsCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"config", "defaults"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, &errOut)
	}
	path := filepath.Join(t.TempDir(), "broker.yaml")
	os.WriteFile(path, out.Bytes(), 0o644)
	var check bytes.Buffer
	if code := run([]string{"config", "check", path}, &check, &errOut); code != 0 {
		t.Fatalf("the defaults do not check (exit %d):\n%s", code, &check)
	}
	cfg, _, code := brokerConfig([]string{"--config", path}, &errOut)
	if code >= 0 {
		t.Fatalf("the broker refuses its defaults: %s", &errOut)
	}
	if cfg.Store.DiskHighWater != 0.9 || cfg.Listen != server.DefaultListen {
		t.Fatalf("the defaults load as %+v", cfg.Store)
	}
}

// TestConfigDocIsCurrent fails when docs/config.md is not what the
// reference prints now.
func TestConfigDocIsCurrent(t *testing.T) {
	const doc = "../../docs/config.md"
	have, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := server.WriteMarkdown(&want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want.Bytes()) {
		t.Fatal("docs/config.md differs from the config reference; regenerate it from the repository's root with\n" +
			"\tgo run ./cmd/broker config defaults --markdown > docs/config.md")
	}
}
