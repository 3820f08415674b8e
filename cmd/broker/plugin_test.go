package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// sdkDir is the sdk module of this repository, which scaffolded modules
// are pointed at with --sdk-path.
func sdkDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "sdk"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// tutorialBlock matches a fenced block of a Markdown document and its language.
var tutorialBlock = regexp.MustCompile("(?ms)^```(\\w*)\n(.*?)^```")

// TestPluginTutorial runs the "Your first filter" tutorial of
// docs/plugins.md as it is written, in an empty temporary directory: its
// shell blocks command by command (broker commands in this process, go
// commands with the go toolchain, the broker itself as a child process),
// its YAML block saved under the name its first line gives, its output
// block compared with what the command before printed, and its Go block
// done with the official client: produce messages with and without the
// property, consume through the filter, get only the matching ones. The
// broker command line is mapped to a config as the command maps it
// (brokerConfig) and started in this process, so the test can wait for
// the official consumer's start-up rebalance, which its Shutdown must not
// overlap. What the test adds to the commands is only what a shared
// machine needs: ports 0 (and --broker for admin commands to find the
// broker), and $SDK set to this repository's sdk. The module is built once per run
// (twice: the tutorial rebuilds after an edit), with the go build cache.
func TestPluginTutorial(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin module and starts a broker")
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "plugins.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "### Your first filter\n")
	if !ok {
		t.Fatal(`docs/plugins.md has no "### Your first filter"`)
	}
	section, _, _ = strings.Cut(section, "\n### ")
	vars := map[string]string{"SDK": sdkDir(t)}
	rlog.SetLogLevel("error")
	t.Chdir(t.TempDir())

	var (
		env        *brokertest.Env
		brokerAddr string
		lastOut    string
		consumed   bool
		reloaded   bool
	)
	// runLine runs one command of a shell block.
	runLine := func(line string) {
		t.Helper()
		words := splitWords(os.Expand(line, func(k string) string { return vars[k] }))
		switch {
		case len(words) == 0:
		case len(words) == 1 && strings.Contains(words[0], "="):
			k, v, _ := strings.Cut(words[0], "=")
			if _, set := vars[k]; !set {
				vars[k] = v
			}
		case words[0] == "go":
			cmd := exec.Command("go", words[1:]...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
			lastOut = string(out)
		case words[0] == "broker" && len(words) > 1 && strings.HasPrefix(words[1], "-"):
			// The broker itself, on ports of its own.
			args := append(words[1:], "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0", "--grpc-listen", "", "--http-listen", "")
			cfg, _, code := brokerConfig(args, io.Discard)
			if code >= 0 {
				t.Fatalf("%s: exit %d", line, code)
			}
			cfg.Logger = brokertest.Logger()
			env = brokertest.StartConfig(t, cfg)
			brokerAddr = env.BrokerAddr
		case words[0] == "broker" && len(words) > 1 && words[1] == "admin":
			if brokerAddr == "" {
				t.Fatalf("%s: before the broker was started", line)
			}
			code, out, errs := runCmd(append([]string{"admin", "--broker", brokerAddr}, words[2:]...)...)
			if code != 0 {
				t.Fatalf("%s: exit %d\n%s%s", line, code, out, errs)
			}
			lastOut = out
		case words[0] == "broker":
			code, out, errs := runCmd(words[1:]...)
			if code != 0 {
				t.Fatalf("%s: exit %d\n%s%s", line, code, out, errs)
			}
			lastOut = out
		default:
			t.Fatalf("the tutorial's command %q is not one this test runs", line)
		}
	}

	blocks := tutorialBlock.FindAllStringSubmatch(section, -1)
	if len(blocks) < 6 {
		t.Fatalf("the tutorial has %d blocks; is the extraction broken?", len(blocks))
	}
	for _, b := range blocks {
		lang, body := b[1], b[2]
		switch lang {
		case "sh":
			if strings.Contains(body, "plugins reload") {
				// Step 5's edit, done as an author would.
				edit(t, filepath.Join("regionfilter", "main.go"), `sdk.SetVersion("0.1.0")`, `sdk.SetVersion("0.2.0")`)
				reloaded = true
			}
			for _, line := range strings.Split(body, "\n") {
				runLine(strings.TrimSpace(stripComment(line)))
			}
			if reloaded {
				if !strings.Contains(lastOut, "reloaded:") || !strings.Contains(lastOut, "region") {
					t.Fatalf("plugins reload printed %q", lastOut)
				}
			}
		case "yaml":
			name, ok := strings.CutPrefix(strings.SplitN(body, "\n", 2)[0], "# ")
			if !ok {
				t.Fatalf("a YAML block without its file name on its first line:\n%s", body)
			}
			if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		case "text":
			if strings.TrimSpace(lastOut) != strings.TrimSpace(body) {
				t.Fatalf("the command printed\n%s\nthe tutorial shows\n%s", lastOut, body)
			}
		case "go":
			if env == nil {
				t.Fatal("the Go block comes before the broker is started")
			}
			consumeThroughFilter(t, env, []string{"1", "2", "3"}, "1", "3")
			consumed = true
		default:
			t.Fatalf("a %q block in the tutorial", lang)
		}
	}
	if !consumed || !reloaded {
		t.Fatalf("the tutorial did not consume (%v) or reload (%v)", consumed, reloaded)
	}
	// After the reload the new module filters, and says so.
	consumeThroughFilter(t, env, []string{"4", "5", "6"}, "1", "3", "4", "6")
	code, out, errs := runCmd("admin", "--broker", brokerAddr, "--json", "plugins", "list")
	var ps []server.PluginStatus
	if code != 0 || json.Unmarshal([]byte(out), &ps) != nil || len(ps) != 1 {
		t.Fatalf("plugins list: exit %d, %s%s", code, out, errs)
	}
	if p := ps[0]; p.Name != "region" || p.Version != "0.2.0" || p.Generation != 2 || p.Errors != 0 || p.Records == 0 {
		t.Fatalf("after the reload: %+v", p)
	}
}

// edit replaces old with new in the file at path, which must hold old.
func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not hold %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// consumeThroughFilter does what the tutorial's Go block shows: it sends
// three messages to Orders (ids send, regions eu, us, eu), all to queue 0
// so they are pulled in order, and a new consumer group subscribed with
// REGION "region=eu" from the first offset receives exactly the ids want.
func consumeThroughFilter(t *testing.T, env *brokertest.Env, send []string, want ...string) {
	t.Helper()
	p := env.Producer(t, producer.WithQueueSelector(producer.NewManualQueueSelector()))
	for i, id := range send {
		msg := primitive.NewMessage("Orders", []byte(`{"id": `+id+`}`))
		msg.WithProperty("region", []string{"eu", "us"}[i%2])
		msg.Queue = &primitive.MessageQueue{Topic: "Orders", BrokerName: broker.DefaultBrokerName, QueueId: 0}
		if res, err := p.SendSync(context.Background(), msg); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %s: %v %v", id, res, err)
		}
	}

	var (
		mu   sync.Mutex
		got  []string
		done = make(chan struct{})
	)
	for i, id := range want {
		want[i] = `{"id": ` + id + `}`
	}
	group := brokertest.Name("eu_orders")
	cons := env.PushConsumer(t, group) // from the first offset
	err := cons.Subscribe("Orders", consumer.MessageSelector{Type: "REGION", Expression: "region=eu"},
		func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range msgs {
				got = append(got, string(m.Body))
			}
			if len(got) == len(want) {
				close(done)
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, cons, group, true, "Orders")
	brokertest.Wait(t, done, time.Minute, "the eu messages")
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("consumed %q through the filter, want %q", got, want)
	}
}

// TestPluginKinds scaffolds, tests, builds and runs the other three kinds
// the way the tutorial does a filter: each module's own test passes
// natively, and broker plugin test loads the built module (ABI check,
// init, self-tests) and prints its answers to the samples it came with.
func TestPluginKinds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds plugin modules")
	}
	dir := t.TempDir()
	for _, c := range []struct {
		kind, samples string
		want          []string
	}{
		{"allocate", "requests.jsonl", []string{
			"allocate plugin, ABI v1.4, version 0.1.0: init and self-tests passed",
			"line 1: c1 of group billing gets 2 of 3 queues: Orders@broker-a/0 Orders@broker-a/2",
			"line 2: c2 of group billing gets 1 of 3 queues: Orders@broker-a/1",
		}},
		{"txncheck", "messages.jsonl", []string{
			"txncheck plugin, ABI v1.4, version 0.1.0: init and self-tests passed",
			"line 1: wait 6s (msgId m1, 0 checks so far)",
			"line 2: check-now (msgId m2, 1 checks so far)",
			"line 3: rollback (msgId m3, 5 checks so far)",
		}},
		{"transform", "messages.jsonl", []string{
			"transform plugin, ABI v1.4, version 0.1.0: init and self-tests passed",
			"line 1: changed: properties TAGS=eu region=eu",
			"line 2: rejected: property region is required",
		}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			mod := filepath.Join(dir, "my"+c.kind)
			if code, out, errs := runCmd("plugin", "new", c.kind, mod, "--sdk-path", sdkDir(t)); code != 0 {
				t.Fatalf("new: exit %d\n%s%s", code, out, errs)
			}
			cmd := exec.Command("go", "test", "./...")
			cmd.Dir = mod
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go test in the new module: %v\n%s", err, out)
			}
			if code, out, errs := runCmd("plugin", "build", mod); code != 0 || !strings.Contains(out, "sha256: ") {
				t.Fatalf("build: exit %d\n%s%s", code, out, errs)
			}
			code, out, errs := runCmd("plugin", "test", filepath.Join(mod, "my"+c.kind+".wasm"), "--kind", c.kind, "--messages", filepath.Join(mod, c.samples))
			if code != 0 {
				t.Fatalf("test: exit %d\n%s%s", code, out, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("broker plugin test printed\n%s\nwithout %q", out, w)
				}
			}
			// A sample with a field the kind does not have is refused by line.
			bad := writeFile(t, mod, "bad.jsonl", "\n"+`{"group": "g", "queueCount": 4}`+"\n")
			code, _, errs = runCmd("plugin", "test", filepath.Join(mod, "my"+c.kind+".wasm"), "--kind", c.kind, "--messages", bad)
			if code != 1 || !strings.Contains(errs, "line 2: json: unknown field") {
				t.Errorf("a bad sample: exit %d, %q", code, errs)
			}
			if c.kind == "transform" {
				// A self-test that is wrong about the outcome refuses the
				// module, naming the test.
				src := filepath.Join(mod, "main.go")
				b, err := os.ReadFile(src)
				if err != nil {
					t.Fatal(err)
				}
				wrong := strings.Replace(string(b), `Want:    sdk.TransformWant{Tags: "eu"}`, `Want:    sdk.TransformWant{Tags: "us"}`, 1)
				if wrong == string(b) {
					t.Fatal("the scaffold's self-test for the tag is not where the test expects it")
				}
				writeFile(t, mod, "main.go", wrong)
				if code, out, errs := runCmd("plugin", "build", mod); code != 0 {
					t.Fatalf("build: exit %d\n%s%s", code, out, errs)
				}
				code, _, errs = runCmd("plugin", "test", filepath.Join(mod, "my"+c.kind+".wasm"), "--kind", c.kind, "--messages", filepath.Join(mod, c.samples))
				if code != 1 || !strings.Contains(errs, `self-test failed: vector 0 (transform test "a region becomes the tag"): properties {TAGS="eu", region="eu"}, want {TAGS="us", region="eu"}`) {
					t.Errorf("a wrong self-test: exit %d, %q", code, errs)
				}
			}
		})
	}
}

// TestPluginCommandErrors checks that each mistake gets a clear message and
// a usage exit status, and that nothing is written over an author's files.
func TestPluginCommandErrors(t *testing.T) {
	dir := t.TempDir()
	taken := filepath.Join(dir, "taken")
	if err := os.MkdirAll(taken, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, taken, "main.go", "package main\n")
	samples := writeFile(t, dir, "bad.jsonl", `{"topic": "T", "colour": "red"}`+"\n")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"plugin"}, 2, "broker plugin new <kind> <dir>"},
		{[]string{"plugin", "frob"}, 2, `unknown verb "frob"`},
		{[]string{"plugin", "new", "sort", filepath.Join(dir, "x")}, 2, `kind "sort" is not filter, allocate, txncheck or transform`},
		{[]string{"plugin", "new", "filter"}, 2, "want 2 argument(s)"},
		{[]string{"plugin", "new", "filter", filepath.Join(dir, "Bad Name")}, 2, "does not make a plugin name"},
		{[]string{"plugin", "new", "filter", taken}, 1, "exists and is not empty"},
		{[]string{"plugin", "new", "filter", filepath.Join(dir, "y"), "--sdk-path", dir}, 2, "--sdk-path " + dir},
		{[]string{"plugin", "new", "filter", filepath.Join(dir, "z"), "--sdk-path", filepath.Join("..", "..")}, 2, "is not the module " + sdkModule},
		{[]string{"plugin", "build", taken}, 1, "go build"},
		{[]string{"plugin", "test", "m.wasm"}, 2, "--messages required"},
		{[]string{"plugin", "test", "m.wasm", "--messages", samples}, 2, "--expr required for a filter"},
		{[]string{"plugin", "test", "m.wasm", "--kind", "allocate", "--expr", "x", "--messages", samples}, 2, "--expr is for filters"},
		{[]string{"plugin", "test", "m.wasm", "--kind", "sort", "--messages", samples}, 2, `kind "sort"`},
		{[]string{"plugin", "test", filepath.Join(dir, "none.wasm"), "--expr", "a=b", "--messages", samples}, 1, "none.wasm"},
		{[]string{"plugin", "test", "m.wasm", "--expr", "a=b", "--messages", filepath.Join(dir, "none.jsonl")}, 1, "none.jsonl"},
	} {
		code, _, errs := runCmd(c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("broker %s: exit %d, %q; want exit %d and %q", strings.Join(c.args, " "), code, errs, c.code, c.want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(taken, "main.go")); err != nil || string(b) != "package main\n" {
		t.Fatalf("an existing file was touched: %q, %v", b, err)
	}
	for _, verb := range []string{"new", "build", "test"} {
		if code, _, _ := runCmd("plugin", verb, "-h"); code != 0 {
			t.Errorf("plugin %s -h: exit %d", verb, code)
		}
	}
}
