package lint

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// raftChanged are the files of third_party/raft that differ from the
// upstream release: only by lines added (its README says what they do).
var raftChanged = []string{"api.go", "future.go", "log.go", "raft.go", "replication.go"}

// TestRaftCopyMatchesUpstream holds third_party/raft to what its README
// says: the non-test sources of the hashicorp/raft release go.mod
// requires, byte for byte, except raftChanged, whose upstream lines all
// remain, in order, between the lines added. An edit made there by
// mistake, or a release moved to without carrying the change, fails here.
func TestRaftCopyMatchesUpstream(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	req := regexp.MustCompile(`(?m)^\s*github\.com/hashicorp/raft (v\S+)$`).FindSubmatch(mod)
	if req == nil {
		t.Fatal("go.mod requires no github.com/hashicorp/raft")
	}
	if !bytes.Contains(mod, []byte("\nreplace github.com/hashicorp/raft => ./third_party/raft\n")) {
		t.Fatal("go.mod does not replace github.com/hashicorp/raft with ./third_party/raft")
	}
	// Outside any module, so the download touches no go.sum.
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/hashicorp/raft@"+string(req[1]))
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	out, err := cmd.Output()
	var dl struct{ Dir, Error string }
	if err == nil {
		err = json.Unmarshal(out, &dl)
	}
	if err != nil || dl.Dir == "" {
		msg := "cannot download hashicorp/raft " + string(req[1]) + ": " + dl.Error
		if err != nil {
			msg += " " + err.Error()
		}
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}

	sources := func(dir string) []string {
		t.Helper()
		names, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range names {
			if !strings.HasSuffix(n, "_test.go") {
				out = append(out, filepath.Base(n))
			}
		}
		return out
	}
	ours, theirs := sources("../../third_party/raft"), sources(dl.Dir)
	if !slices.Equal(ours, theirs) {
		t.Fatalf("third_party/raft holds %v, the release's sources are %v", ours, theirs)
	}
	for _, name := range ours {
		a, err := os.ReadFile(filepath.Join("../../third_party/raft", name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dl.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !slices.Contains(raftChanged, name):
			if !bytes.Equal(a, b) {
				t.Errorf("third_party/raft/%s differs from the release's", name)
			}
		case bytes.Equal(a, b):
			t.Errorf("third_party/raft/%s is the release's: the change is missing", name)
		case !linesKept(b, a):
			t.Errorf("third_party/raft/%s changes or drops lines of the release's, where it may only add", name)
		}
	}
}

// linesKept reports whether every line of from is in to, in order.
func linesKept(from, to []byte) bool {
	want := bytes.Split(from, []byte("\n"))
	i := 0
	for _, l := range bytes.Split(to, []byte("\n")) {
		if i < len(want) && bytes.Equal(l, want[i]) {
			i++
		}
	}
	return i == len(want)
}
