package server

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigDocsCoverEveryKey fails when a key of the config file has no
// line in configDocs, or a line names a key the file no longer has.
func TestConfigDocsCoverEveryKey(t *testing.T) {
	keys := map[string]bool{}
	for _, k := range ConfigReference() {
		keys[k.Key] = true
		if k.Doc == "" {
			t.Errorf("config key %s (%s) has no description: add one to configDocs in configdocs.go", k.Key, k.Type)
		}
	}
	for k := range configDocs {
		if !keys[k] {
			t.Errorf("configDocs describes %s, which is not a config key", k)
		}
	}
	if len(keys) < 100 {
		t.Fatalf("only %d keys found; the walk misses sections", len(keys))
	}
}

// TestConfigDefaultsReadBack checks that the printed defaults are a
// config file the loader reads back to exactly CommandDefaults, and that
// the checker finds nothing wrong with it.
func TestConfigDefaultsReadBack(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteDefaults(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "broker.yaml")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if errs := CheckFile(path); len(errs) != 0 {
		t.Fatalf("the defaults do not check: %v\n%s", errs, buf.String())
	}
	var c Config
	if err := c.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	got, want := configKeys(c), ConfigReference()
	if len(got) != len(want) {
		t.Fatalf("%d keys read back, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Key != want[i].Key || got[i].Default != want[i].Default {
			t.Errorf("%s reads back as %s, want %s", want[i].Key, got[i].Default, want[i].Default)
		}
	}
	for _, key := range []string{"store.flush", "remoting.maxConns", "limits.deadline", "accounts"} {
		if !strings.Contains(buf.String(), strings.TrimPrefix(key, "store.")+":") && !strings.Contains(buf.String(), key[strings.LastIndex(key, ".")+1:]+":") {
			t.Errorf("%s is missing from the defaults", key)
		}
	}
}

// TestCheckFileReportsEveryProblem writes a file with one problem of each
// kind and expects every one reported, with its line where it has one.
func TestCheckFileReportsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "broker.yaml")
	const file = `listen: 127.0.0.1:0
brokerNmae: typo
store:
  segmentSize: 1KiB
  diskHighWater: 2
  flush: sometimes
maxTopics: many
tls:
  mode: maybe
remoting:
  idleTimeout: 3 apples
cluster:
  setName: s
`
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	errs := CheckFile(path)
	var all []string
	for _, e := range errs {
		all = append(all, e.Error())
	}
	text := strings.Join(all, "\n")
	for _, want := range []string{
		"line 2: field brokerNmae not found",
		"line 6", // flush: sometimes
		"line 7", // maxTopics: many
		"line 11",
		"SegmentSize 1024 is below the minimum",
		"DiskHighWater 2 is above 1",
		`tls: mode "maybe"`,
		"cluster: setName, nodeId and peers are all required",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the check does not report %q; it says:\n%s", want, text)
		}
	}

	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, []byte("store: {flush: async}\nmaxTopics: 10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if errs := CheckFile(good); len(errs) != 0 {
		t.Fatalf("a good file: %v", errs)
	}
}
