package lint

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/rmq-go/rmq"

// rule forbids packages under from (a module-relative prefix) to import
// anything matching one of the prefixes in deny. Prefixes without a dot
// are module-relative.
type rule struct {
	from string
	deny []string
	// only, when set, allows just these prefixes (plus the standard
	// library) and denies everything else.
	only []string
	// via lists prefixes whose own dependencies this rule does not check
	// transitively: they are held to their own rules instead. It is for a
	// package designed to be used from here that itself depends on what
	// this rule denies to direct imports.
	via []string
	// direct limits the rule to the package's own imports: the
	// dependency graph check (graph_test.go) skips it. It is for a library
	// the package must not use itself but a dependency already brings in.
	direct bool
}

// rules are the import rules of docs/architecture.md, whose table must
// change with them. internal/properties is the properties
// codec, a leaf under core/message, so every package that reads messages
// may reach it; the sdk, a
// module of its own, keeps a copy held to it by a differential test.
var rules = []rule{
	{from: "core/message", only: []string{"internal/properties"}},
	{from: "internal/properties", only: []string{}},
	{from: "internal/cputime", only: []string{}},
	{from: "core/allocate", only: []string{}},
	{from: "core/outbox", only: []string{"core/message", "internal/properties"}},
	{from: "core/remoting", only: []string{"core/message", "internal/properties", "internal/ratelog", "internal/sniff"}},
	{from: "internal/sniff", only: []string{}},
	{from: "internal/ratelog", only: []string{}},
	{from: "core/acl", only: []string{"core/remoting", "core/message", "internal/properties", "internal/ratelog", "internal/sniff", "go.yaml.in/yaml/v3"}},
	// The load generator speaks both protocols as clients do: the
	// remoting one through core/remoting, RocketMQ 5's through the
	// generated gRPC client, whose own dependencies are held to its rule.
	{from: "internal/bench", only: []string{"core/remoting", "core/message", "internal/properties", "internal/ratelog", "internal/sniff",
		"internal/rmqpb", "google.golang.org/grpc", "google.golang.org/protobuf"}, via: []string{"google.golang.org/grpc", "google.golang.org/protobuf"}},
	// The scale simulation drives a real name server over the remoting
	// protocol and runs the allocation strategies; it reaches no broker or
	// store.
	{from: "internal/scalesim", only: []string{"core/namesrv", "core/remoting", "core/allocate", "core/message", "internal/properties", "internal/ratelog", "internal/sniff", "internal/cputime"}},
	{from: "core/store", deny: []string{"core/remoting", "core/broker", "core/namesrv", "plugins", "filters", "github.com/hashicorp/raft"}},
	// Replication knows the store and raft, never what runs on them.
	{from: "core/cluster", deny: []string{"core/broker", "core/remoting", "core/namesrv", "plugins", "filters", "internal/server"}},
	{from: "core/namesrv", deny: []string{"core/store", "core/broker"}},
	{from: "core/broker", deny: []string{"plugins", "filters", "cmd", "internal/rmqpb", "google.golang.org/grpc", "github.com/tetratelabs/wazero", "github.com/nats-io", "github.com/spf13/pflag"}},
	{from: "filters", only: []string{"core/message", "internal/properties"}},
	{from: "plugins/wasm", deny: []string{"core/store", "core/remoting", "core/namesrv", "core/broker"}},
	{from: "plugins/natsbridge", deny: []string{"core/store", "core/broker", "github.com/tetratelabs/wazero"}},
	// The sdk is a module of its own that a plugin's module requires: the
	// standard library only, so it brings an author nothing else.
	{from: "sdk", only: []string{}},
	// The generated protocol code of RocketMQ 5 depends on gRPC and
	// protobuf only; the gRPC endpoint is a front end of the broker, like
	// the remoting port, and loads no plugin itself.
	{from: "internal/rmqpb", only: []string{"google.golang.org/grpc", "google.golang.org/protobuf"}, via: []string{"google.golang.org/grpc", "google.golang.org/protobuf"}},
	{from: "internal/grpcserver", deny: []string{"plugins", "filters", "cmd", "internal/server", "core/namesrv", "github.com/tetratelabs/wazero", "github.com/nats-io"}},
	// It speaks to the broker in the broker's own types and errors, never
	// in the remoting protocol's codes, headers or remarks (core/broker
	// keeps the remoting handlers and imports core/remoting itself), and
	// consumes through the broker's POP engine, never the store itself.
	{from: "internal/grpcserver", deny: []string{"core/remoting", "core/store"}, direct: true},
	// Decompression for the broker's front ends; the client decompresses
	// zlib on the standard library.
	{from: "internal/inflate", only: []string{"core/message", "internal/properties", "github.com/klauspost/compress", "github.com/pierrec/lz4/v4"}, via: []string{"github.com/klauspost/compress", "github.com/pierrec/lz4/v4"}},
	{from: "client", only: []string{"core/remoting", "core/message", "core/allocate", "internal/properties", "internal/ratelog", "internal/sniff"}},
	// Guests may use the filters, which are built over core/message views
	// and compile into WASM; the host-side plugin checker loads guests
	// through plugins/wasm, whose API is core/message records.
	{from: "examples/wasm", deny: []string{"core"}, via: []string{"filters", "plugins/wasm"}},
	{from: "", deny: []string{"cmd"}},
	// Metrics: the core and the plugins keep atomic counters and
	// fixed-bucket histograms (internal/histogram, a leaf); only
	// internal/metrics reads them into Prometheus collectors, at scrape
	// time. The rule is on direct imports: pebble, under the store,
	// imports the Prometheus client itself.
	{from: "internal/histogram", only: []string{}},
	// The Apache importer decides; cmd/broker applies through the wire.
	{from: "internal/apacheimport", only: []string{"go.yaml.in/yaml/v3"}},
	{from: "core", deny: []string{prometheus}, direct: true},
	{from: "plugins", deny: []string{prometheus}, direct: true},
	{from: "internal/metrics", deny: []string{"internal/server", "cmd"}},
}

// prometheus is the metrics library.
const prometheus = "github.com/prometheus"

func TestImportRules(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "data") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, r := range rules {
				if !under(rel, r.from) {
					continue
				}
				if msg := r.check(rel, p); msg != "" {
					t.Errorf("%s imports %s: %s", filepath.ToSlash(mustRel(root, path)), p, msg)
				}
			}
		}
		checked++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("only %d files checked; is the walk broken?", checked)
	}
}

func (r rule) check(rel, imp string) string {
	if r.only != nil {
		if !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
			return "" // the standard library
		}
		for _, ok := range r.only {
			if matches(imp, ok) {
				return ""
			}
		}
		if strings.HasPrefix(imp, module+"/") && matches(imp, r.from) {
			return "" // its own subpackages
		}
		return "packages under " + r.from + " may import only the standard library and " + strings.Join(r.only, ", ")
	}
	for _, d := range r.deny {
		if matches(imp, d) && !(r.from == "" && under(rel, "cmd")) {
			return "packages under " + orRoot(r.from) + " must not import " + d
		}
	}
	return ""
}

func orRoot(s string) string {
	if s == "" {
		return "the module"
	}
	return s
}

// matches reports whether import path imp is prefix or under it.
func matches(imp, prefix string) bool {
	if !strings.Contains(strings.SplitN(prefix, "/", 2)[0], ".") {
		prefix = module + "/" + prefix
	}
	return imp == prefix || strings.HasPrefix(imp, prefix+"/")
}

func under(rel, prefix string) bool {
	return prefix == "" || rel == prefix || strings.HasPrefix(rel, prefix+"/")
}

func mustRel(root, p string) string {
	r, _ := filepath.Rel(root, p)
	return r
}

// TestRuleCatchesViolation proves the checker fails on a forbidden import.
func TestRuleCatchesViolation(t *testing.T) {
	for _, c := range []struct {
		rel, imp string
		bad      bool
	}{
		{"core/store", module + "/core/broker", true},
		{"core/store", module + "/core/message", false},
		{"filters/sql92", "strings", false},
		{"filters/sql92", module + "/core/message", false},
		{"filters/sql92", module + "/core/store", true},
		{"filters/sql92", "github.com/x/y", true},
		{"core/broker", "github.com/nats-io/nats.go", true},
		{"core/message", module + "/core/remoting", true},
		{"internal/server", module + "/cmd/broker", true},
		{"core/remoting", module + "/core/store", true},
		{"core/remoting", "github.com/x/y", true},
		{"internal/bench", module + "/core/broker", true},
		{"internal/bench", module + "/core/remoting", false},
		{"sdk", module + "/internal/properties", true},
		{"sdk", module + "/sdk/abi", false},
		{"sdk", module + "/core/message", true},
		{"internal/properties", module + "/core/message", true},
		{"core/outbox", module + "/core/message", false},
		{"core/outbox", module + "/core/broker", true},
		{"plugins/natsbridge", module + "/core/broker", true},
		{"plugins/natsbridge", module + "/core/outbox", false},
		{"core/acl", module + "/core/remoting", false},
		{"core/acl", "go.yaml.in/yaml/v3", false},
		{"core/acl", module + "/core/broker", true},
		{"core/acl", "gopkg.in/yaml.v3", true},
		{"core/store", "github.com/prometheus/client_golang/prometheus", true},
		{"core/broker", "github.com/prometheus/client_golang/prometheus", true},
		{"plugins/wasm", "github.com/prometheus/client_golang/prometheus", true},
		{"plugins/natsbridge", "github.com/prometheus/client_golang/prometheus", true},
		{"internal/metrics", "github.com/prometheus/client_golang/prometheus", false},
		{"internal/histogram", "github.com/prometheus/client_golang/prometheus", true},
		{"core/broker", module + "/internal/histogram", false},
	} {
		bad := false
		for _, r := range rules {
			if under(c.rel, r.from) && r.check(c.rel, c.imp) != "" {
				bad = true
			}
		}
		if bad != c.bad {
			t.Errorf("%s importing %s: flagged=%v, want %v", c.rel, c.imp, bad, c.bad)
		}
	}
}
