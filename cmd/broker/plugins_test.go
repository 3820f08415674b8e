package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// built holds what the tests build once per process: the jsonfield example
// module and a compilation cache shared by the in-process brokers. The
// examples' own builder is internal to examples/wasm, so this is a copy of
// its one command.
var built struct {
	once     sync.Once
	dir      string
	module   string // jsonfield.wasm
	cacheDir string
	err      error
}

func removeBuiltModules() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// jsonfieldModule returns the path of the jsonfield example, built with
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared, and the shared
// compilation cache.
func jsonfieldModule(t *testing.T) (module, cacheDir string) {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "broker-cmd-test-"); built.err != nil {
			return
		}
		built.module = filepath.Join(built.dir, "jsonfield.wasm")
		built.cacheDir = filepath.Join(built.dir, "cache")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", built.module, ".")
		cmd.Dir = filepath.Join("..", "..", "examples", "wasm", "jsonfield")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("building jsonfield: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.module, built.cacheDir
}

// writeFile writes a file under dir and returns its path.
func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestPluginConfig maps the plugin list of a config file onto the server's.
func TestPluginConfig(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "broker.yaml", `
plugins:
  - name: class
    kind: filter
    module: plugins/jsonfield.wasm
    sha256: ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789
    expressionType: CLASS
    failurePolicy: open
    config: {field: region, depth: 3, tags: [a, b]}
    env: {MODE: strict}
    trusted: false
    limits: {memoryPages: 512, deadline: 20ms, maxBinarySize: 8MiB, poolSize: 3, maxFailures: 2, recycleAfter: 1000}
  - name: backoff
    kind: txncheck
    module: /abs/txnbackoff.wasm
    config: "base=1s cap=1m max=15"
    groups: [payments, orders]
  - name: sticky
    kind: allocate
    module: sticky.wasm
`)
	var cfg server.Config
	if err := cfg.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Plugins) != 3 {
		t.Fatalf("%d plugins", len(cfg.Plugins))
	}
	class, backoff, sticky := cfg.Plugins[0], cfg.Plugins[1], cfg.Plugins[2]
	want := wasm.Options{
		Name: "class", Kind: wasm.KindFilter, ExpressionType: "CLASS",
		Path:   filepath.Join(dir, "plugins", "jsonfield.wasm"),
		SHA256: "ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789",
		Config: []byte(`{"depth":3,"field":"region","tags":["a","b"]}`), Env: map[string]string{"MODE": "strict"},
		FailurePolicy: wasm.PolicyOpen, MaxMemoryPages: 512, Untrusted: true, Deadline: 20 * time.Millisecond,
		MaxBinarySize: 8 << 20, PoolSize: 3, MaxFailures: 2, RecycleAfter: 1000,
	}
	if got := fmt.Sprintf("%+v", class.Options); got != fmt.Sprintf("%+v", want) || string(class.Config) != string(want.Config) {
		t.Fatalf("filter plugin\n got %+v\nwant %+v\nconfig %s", class.Options, want, class.Config)
	}
	if backoff.Kind != wasm.KindTxnCheck || backoff.Path != "/abs/txnbackoff.wasm" || string(backoff.Config) != "base=1s cap=1m max=15" ||
		strings.Join(backoff.Groups, ",") != "payments,orders" || backoff.Untrusted {
		t.Fatalf("txncheck plugin %+v", backoff)
	}
	if sticky.Config != nil || sticky.Groups != nil || sticky.Path != filepath.Join(dir, "sticky.wasm") {
		t.Fatalf("allocate plugin %+v", sticky)
	}

	// A file that cannot be read stops the command (exit 2); values the
	// plugin host refuses stop the broker before it serves (exit 1), each
	// naming the plugin.
	for _, c := range []struct {
		yaml string
		code int
		want string
	}{
		{"plugins:\n  - {name: f, kind: filter, module: m.wasm, groups: [g]}\n", 1, `plugin \"f\": config: wasm: invalid options: groups are for allocate and txncheck`},
		{"plugins:\n  - {name: a, kind: allocate, module: m.wasm, expressionType: X}\n", 1, `expression type \"X\" is only for filters`},
		{"plugins:\n  - {name: a, kind: allocate, module: m.wasm, failurePolicy: open}\n", 1, `failure policy \"open\" is only for filters`},
		{"plugins:\n  - {name: d, kind: filter, module: m.wasm, limits: {deadline: 1s}}\n", 1, `limits.deadline) bounds untrusted plugins only`},
		{"plugins:\n  - {name: n, kind: filter}\n", 1, `exactly one of path and module must be set`},
		{"plugins:\n  - {name: j, kind: filter, module: m.wasm, config: {1: x}}\n", 2, `line 2: config: the value cannot be passed as JSON`},
		{"plugins:\n  - {name: k, kind: filter, module: m.wasm, limit: {}}\n", 2, `field limit not found`},
	} {
		code, _, errs := runCmd("--config", writeFile(t, dir, "bad.yaml", c.yaml), "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--namesrv-listen", "", "--http-listen", "127.0.0.1:0")
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", c.yaml, code, errs, c.code, c.want)
		}
	}
}

// TestPluginStartRefused starts the broker with a plugin that cannot load:
// the broker does not start, and the error names the plugin.
func TestPluginStartRefused(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "junk.wasm", "not a module")
	for _, c := range []struct {
		name, plugin string
		want         []string
	}{
		{"bad kind", "{name: sorter, kind: sort, module: junk.wasm}", []string{`plugin \"sorter\"`, `kind \"sort\" is not filter, allocate, txncheck or transform`}},
		{"missing module", "{name: ghost, kind: filter, module: nowhere/ghost.wasm}", []string{`plugin \"ghost\"`, "ghost.wasm", "no such file"}},
		{"bad sha256", "{name: pinned, kind: filter, module: junk.wasm, sha256: " + strings.Repeat("ab", 32) + "}", []string{`plugin \"pinned\"`, "sha256 mismatch"}},
		{"not a module", "{name: junk, kind: filter, module: junk.wasm}", []string{`plugin \"junk\"`, "invalid module"}},
		{"two defaults", "{name: one, kind: allocate, module: junk.wasm}\n  - {name: two, kind: allocate, module: junk.wasm}", []string{`plugin \"two\"`, `already the default allocate plugin`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := writeFile(t, dir, "broker.yaml", "listen: 127.0.0.1:0\nnamesrvListen: \"\"\nhttpListen: 127.0.0.1:0\ngrpcListen: \"\"\nplugins:\n  - "+c.plugin+"\n")
			dataDir := t.TempDir()
			code, _, errs := runCmd("--config", cfg, "--data-dir", dataDir)
			if code != 1 || !strings.Contains(errs, "broker failed to start") {
				t.Fatalf("exit %d, stderr %s", code, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q: %s", w, errs)
				}
			}
		})
	}
}

// startWithConfig runs an in-process broker from a config file, as
// runBroker maps it, sharing the test process's compilation cache.
func startWithConfig(t *testing.T, path string) *brokertest.Env {
	t.Helper()
	_, cacheDir := jsonfieldModule(t)
	cfg := server.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: brokertest.Logger()}
	if err := cfg.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	cfg.PluginSource = server.PluginFile(path)
	cfg.PluginCacheDir = cacheDir
	return brokertest.StartConfig(t, cfg)
}

const jsonClassConfig = `listen: 127.0.0.1:0
namesrvListen: ""
plugins:
  - name: jsonclass
    kind: filter
    module: jsonfield.wasm
    expressionType: CLASS
    sha256: %s
    limits: {poolSize: %d}
`

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestAdminPlugins drives "broker admin" against an in-process broker:
// listing plugins, reloading a changed config, a refused reload, and the
// usage errors.
func TestAdminPlugins(t *testing.T) {
	module, _ := jsonfieldModule(t)
	dir := t.TempDir()
	copyFile(t, module, filepath.Join(dir, "jsonfield.wasm")) // relative to the config file
	hash := sha256File(t, module)
	path := writeFile(t, dir, "broker.yaml", fmt.Sprintf(jsonClassConfig, hash, 2))
	env := startWithConfig(t, path)
	admin := func(args ...string) (int, string, string) {
		return runCmd(append([]string{"admin", "--broker", env.BrokerAddr}, args...)...)
	}
	list := func() server.PluginStatus {
		t.Helper()
		code, out, errs := admin("plugins", "list", "--json")
		var ps []server.PluginStatus
		if code != 0 || json.Unmarshal([]byte(out), &ps) != nil || len(ps) != 1 {
			t.Fatalf("plugins list --json: exit %d, %s %s", code, out, errs)
		}
		return ps[0]
	}

	code, out, errs := admin("plugins", "list")
	if code != 0 {
		t.Fatalf("plugins list: exit %d: %s", code, errs)
	}
	for _, w := range []string{"NAME", "P99", "jsonclass", "filter", "CLASS", "1.0.0", hash[:12], "ok"} {
		if !strings.Contains(out, w) {
			t.Errorf("plugins list lacks %q:\n%s", w, out)
		}
	}
	if ps := list(); ps.Generation != 1 || ps.SHA256 != hash || ps.Module != filepath.Join(dir, "jsonfield.wasm") || !ps.Trusted {
		t.Fatalf("plugins list --json: %+v", ps)
	}

	// A changed limit reloads the plugin.
	writeFile(t, dir, "broker.yaml", fmt.Sprintf(jsonClassConfig, hash, 3))
	code, out, errs = admin("plugins", "reload")
	if code != 0 || !strings.Contains(out, "reloaded:") || !strings.Contains(out, "jsonclass") {
		t.Fatalf("plugins reload: exit %d, %q %q", code, out, errs)
	}
	if ps := list(); ps.Generation != 2 {
		t.Fatalf("after reload: %+v", ps)
	}
	code, out, _ = admin("plugins", "reload")
	if code != 0 || !strings.Contains(out, "unchanged: jsonclass") {
		t.Fatalf("second reload: exit %d, %q", code, out)
	}

	// A reload that fails leaves the plugin serving.
	writeFile(t, dir, "broker.yaml", fmt.Sprintf(jsonClassConfig, strings.Repeat("0", 64), 3))
	code, _, errs = admin("plugins", "reload")
	if code != 1 || !strings.Contains(errs, `plugin "jsonclass"`) || !strings.Contains(errs, "sha256 mismatch") {
		t.Fatalf("bad reload: exit %d, %q", code, errs)
	}
	writeFile(t, dir, "broker.yaml", "plugins: [{name: x, kind: filter, module: m.wasm, groups: [g]}]\n")
	if code, _, errs = admin("plugins", "reload"); code != 1 || !strings.Contains(errs, `plugin "x"`) {
		t.Fatalf("reload of a bad file: exit %d, %q", code, errs)
	}
	if ps := list(); ps.Generation != 2 || ps.Disabled {
		t.Fatalf("after refused reloads: %+v", ps)
	}

	// Other commands and usage.
	if code, out, _ := admin("topics", "list"); code != 0 || !strings.Contains(out, "TBW102") {
		t.Errorf("topics list: exit %d, %q", code, out)
	}
	if code, _, errs := admin("consumers", "allocate", "--group", "g", "--topic", "T", "--client", "c"); code != 1 || !strings.Contains(errs, "topic T does not exist") {
		t.Errorf("allocate on a missing topic: exit %d, %q", code, errs)
	}
	if code, _, errs := admin("consumers", "allocate", "--group", "g"); code != 2 || !strings.Contains(errs, "--topic, --client required") {
		t.Errorf("allocate without flags: exit %d, %q", code, errs)
	}
	if code, _, errs := runCmd("admin"); code != 2 || !strings.Contains(errs, "plugins reload") || !strings.Contains(errs, "consumers allocate") {
		t.Errorf("admin usage: exit %d, %q", code, errs)
	}
	if code, _, errs := admin("plugins", "frob"); code != 2 || !strings.Contains(errs, `unknown command "plugins frob"`) {
		t.Errorf("unknown verb: exit %d, %q", code, errs)
	}
	if code, _, errs := admin("plugins", "list", "extra"); code != 2 || !strings.Contains(errs, "unexpected argument") {
		t.Errorf("extra argument: exit %d, %q", code, errs)
	}
	if code, _, _ := admin("plugins", "list", "-h"); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
	if code, _, errs := runCmd("admin", "--broker", "127.0.0.1:1", "--timeout", "5s", "plugins", "list"); code != 1 || !strings.Contains(errs, "127.0.0.1:1") {
		t.Errorf("no broker: exit %d, %q", code, errs)
	}
}

// TestSIGHUPReloadsPlugins runs the broker command in a child process,
// changes its config file and sends SIGHUP: the plugin list is reloaded.
func TestSIGHUPReloadsPlugins(t *testing.T) {
	module, cacheDir := jsonfieldModule(t)
	dir, dataDir := t.TempDir(), t.TempDir()
	copyFile(t, module, filepath.Join(dir, "jsonfield.wasm"))
	hash := sha256File(t, module)
	path := writeFile(t, dir, "broker.yaml", fmt.Sprintf(jsonClassConfig, hash, 1))
	// Seed the child's cache with the code the in-process brokers
	// compiled, if they ran first: compiling under -race takes seconds.
	if _, err := os.Stat(cacheDir); err == nil {
		copyTree(t, cacheDir, filepath.Join(dataDir, "plugin-cache"))
	}

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "RMQ_BROKER_CHILD_ARGS="+strings.Join([]string{"--config", path, "--data-dir", dataDir, "--grpc-listen", "127.0.0.1:0"}, "\x1f"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 256)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody is waiting for more
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	waitLine := func(re *regexp.Regexp, what string) string {
		t.Helper()
		deadline := time.After(60 * time.Second)
		for {
			select {
			case l := <-lines:
				if re.MatchString(l) {
					return l
				}
			case <-deadline:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitLine(startedLine, "the child broker to start")

	writeFile(t, dir, "broker.yaml", fmt.Sprintf(jsonClassConfig, hash, 2))
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLine(regexp.MustCompile(`msg="plugins reloaded".*reloaded=\[jsonclass\]`), "the reload")

	// A broken file is refused; the broker keeps running and says why.
	writeFile(t, dir, "broker.yaml", "plugins: [{name: jsonclass, kind: nope, module: jsonfield.wasm}]\n")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLine(regexp.MustCompile(`msg="plugin reload refused.*jsonclass`), "the refusal")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("broker exit after SIGTERM: %v", err)
	}
}

// copyTree copies the directory tree from into to.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		copyFile(t, p, filepath.Join(to, rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
