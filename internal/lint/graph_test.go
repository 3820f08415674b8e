package lint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// graph is a package dependency graph: each package's import path mapped to
// its direct, non-test imports. Standard-library packages are left out, so a
// path not in the graph but reached through an edge is the standard library.
type graph map[string][]string

// loadGraph runs `go list -deps -json ./...` in dir with the extra
// environment env and returns the graph of every non-standard package it
// lists, the module's own and its dependencies.
func loadGraph(dir string, env ...string) (graph, error) {
	cmd := exec.Command("go", "list", "-e", "-deps", "-json=ImportPath,Standard,Imports,Error", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, errors.New("go list: " + err.Error() + ": " + stderr.String())
	}
	g := graph{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Standard   bool
			Imports    []string
			Error      *struct{ Err string }
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		if p.Error != nil {
			return nil, errors.New("go list: " + p.ImportPath + ": " + p.Error.Err)
		}
		if !p.Standard {
			g[p.ImportPath] = p.Imports
		}
	}
	return g, nil
}

// checkGraph applies rules to every package of the module in g against
// everything it depends on, directly or not, and returns one message per
// violation, naming the shortest import chain that leads to it.
func checkGraph(g graph, rules []rule) []string {
	var msgs []string
	for _, from := range slices.Sorted(maps.Keys(g)) {
		rel, ok := strings.CutPrefix(from, module+"/")
		if !ok {
			if from != module {
				continue // a dependency, not the module's own
			}
			rel = ""
		}
		for _, r := range rules {
			if !under(rel, r.from) || r.direct {
				continue
			}
			// Breadth first, so each dependency is reported with the
			// shortest chain that reaches it.
			parent := map[string]string{from: ""}
			queue := []string{from}
			for len(queue) > 0 {
				p := queue[0]
				queue = queue[1:]
				if p != from && r.passesVia(p) {
					continue
				}
				for _, imp := range g[p] {
					if _, seen := parent[imp]; seen {
						continue
					}
					if _, ok := g[imp]; !ok {
						continue // the standard library
					}
					parent[imp] = p
					queue = append(queue, imp)
					if msg := r.check(rel, imp); msg != "" {
						msgs = append(msgs, chain(parent, imp)+": "+msg)
					}
				}
			}
		}
	}
	return msgs
}

// passesVia reports whether p is one of r.via, whose dependencies r does
// not check.
func (r rule) passesVia(p string) bool {
	for _, v := range r.via {
		if matches(p, v) {
			return true
		}
	}
	return false
}

// chain spells the import path from the root of parent to p, with the
// module's own packages written relative to the module.
func chain(parent map[string]string, p string) string {
	var links []string
	for ; p != ""; p = parent[p] {
		links = append(links, short(p))
	}
	slices.Reverse(links)
	return strings.Join(links, " → ")
}

func short(p string) string {
	if rel, ok := strings.CutPrefix(p, module+"/"); ok {
		return rel
	}
	return p
}

// pending are violations known and scheduled to go, each with the work
// that removes it. The test fails once one no longer occurs, so the entry
// goes with the violation.
var pending = map[string]string{}

// TestTransitiveImportRules applies the rules to every package of the module
// against its whole dependency graph, as built for the host and for WASM
// guests (GOOS=wasip1), so no package reaches a forbidden one through a
// permitted one.
func TestTransitiveImportRules(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, env := range [][]string{nil, {"GOOS=wasip1", "GOARCH=wasm"}} {
		g, err := loadGraph(root, env...)
		if err != nil {
			t.Fatal(err)
		}
		own := 0
		for p := range g {
			if strings.HasPrefix(p, module+"/") {
				own++
			}
		}
		if own < 20 {
			t.Fatalf("%s: only %d packages of the module listed; is go list broken?", target(env), own)
		}
		for _, msg := range checkGraph(g, rules) {
			if seen[msg] {
				continue
			}
			seen[msg] = true
			if _, ok := pending[msg]; !ok {
				t.Errorf("%s (built for %s)", msg, target(env))
			}
		}
	}
	for msg, why := range pending {
		if !seen[msg] {
			t.Errorf("pending violation no longer occurs, remove it from pending: %s (%s)", msg, why)
		}
	}
}

func target(env []string) string {
	if len(env) == 0 {
		return "the host"
	}
	return strings.Join(env, " ")
}

// TestCheckGraphCatchesIndirect proves the graph check fails on a forbidden
// package reached only through permitted ones, and names the chain.
func TestCheckGraphCatchesIndirect(t *testing.T) {
	m := func(rel string) string { return module + "/" + rel }
	g := graph{
		m("examples/wasm/x"):            {m("filters/y"), m("sdk"), "strings"},
		m("filters/y"):                  {m("core/message"), "bytes"},
		m("sdk"):                        {m("sdk/abi"), m("core/message")},
		m("sdk/abi"):                    {"encoding/binary"},
		m("core/message"):               {"bytes"},
		m("core/store"):                 {m("internal/z")},
		m("internal/z"):                 {m("core/broker")},
		m("core/broker"):                {"github.com/tetratelabs/wazero"},
		"github.com/tetratelabs/wazero": {},
	}
	rules := []rule{
		{from: "examples/wasm", deny: []string{"core"}, via: []string{"sdk"}},
		{from: "filters", only: []string{"core/message"}},
		{from: "core/store", deny: []string{"core/broker"}},
		{from: "core/broker", deny: []string{"github.com/tetratelabs/wazero"}},
	}
	got := checkGraph(g, rules)
	want := []string{
		"core/broker → github.com/tetratelabs/wazero: packages under core/broker must not import github.com/tetratelabs/wazero",
		"core/store → internal/z → core/broker: packages under core/store must not import core/broker",
		"examples/wasm/x → filters/y → core/message: packages under examples/wasm must not import core",
	}
	if !slices.Equal(got, want) {
		t.Errorf("checkGraph:\n got %q\nwant %q", got, want)
	}
	// The same graph without the forbidden edges passes.
	g[m("filters/y")] = []string{"bytes"}
	g[m("internal/z")] = nil
	g[m("core/broker")] = nil
	if got := checkGraph(g, rules); len(got) != 0 {
		t.Errorf("checkGraph on a clean graph: %q", got)
	}
}
