package main

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// sdkModule is the module path of the plugin SDK.
const sdkModule = "github.com/rmq-go/rmq/sdk"

// pluginTemplates holds, per kind, the files "broker plugin new" writes:
// *.tmpl become the file without the suffix, with __NAME__ replaced by the
// plugin's name; the rest are copied as they are.
//
//go:embed plugintemplates
var pluginTemplates embed.FS

// pluginKinds are the kinds "broker plugin new" scaffolds, in usage order,
// with the sample file each kind's module comes with.
var pluginKinds = []struct{ kind, samples string }{
	{"filter", "messages.jsonl"},
	{"allocate", "requests.jsonl"},
	{"txncheck", "messages.jsonl"},
	{"transform", "messages.jsonl"},
}

const pluginUsage = `Usage:
  broker plugin new <kind> <dir> [flags]   write a plugin module: kind filter, allocate, txncheck or transform
  broker plugin build <dir> [flags]        build it into a WebAssembly module (GOOS=wasip1 GOARCH=wasm)
  broker plugin test <module.wasm> --messages FILE [flags]
                                           load a module as the broker does and run it on samples

Run "broker plugin <verb> -h" for the flags of a verb.
`

// runPlugin runs "broker plugin": the tools of a plugin's author, which
// work on files and need no broker.
func runPlugin(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, pluginUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	switch args[0] {
	case "new":
		return runPluginNew(args[1:], stdout, stderr)
	case "build":
		return runPluginBuild(args[1:], stdout, stderr)
	case "test":
		return runPluginTest(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "broker plugin: unknown verb %q\n\n%s", args[0], pluginUsage)
	return 2
}

// pluginFlags makes the flag set of "broker plugin <verb>"; parse parses
// args with it and returns -1 to go on, or the exit code.
func pluginFlags(verb, synopsis, about string, stderr io.Writer) (*pflag.FlagSet, func(args []string, nargs int) int) {
	fs := pflag.NewFlagSet("broker plugin "+verb, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: broker plugin %s %s\n\n%s\nFlags:\n%s", verb, synopsis, about, fs.FlagUsages())
	}
	return fs, func(args []string, nargs int) int {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, pflag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() != nargs {
			fmt.Fprintf(stderr, "broker plugin %s: want %d argument(s), %s; got %d\n", verb, nargs, synopsis, fs.NArg())
			return 2
		}
		return -1
	}
}

// pluginName is a plugin name made of a directory's name: lower case
// letters, digits, '-' and '_', which serve as a file name, a module path
// element and a plugins: entry's name alike.
var pluginName = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)

func runPluginNew(args []string, stdout, stderr io.Writer) int {
	fs, parse := pluginFlags("new", "<kind> <dir>", `Writes a Go module for a plugin of the kind (filter, allocate, txncheck or transform) into dir,
which must not exist or be empty: the plugin's code with self-tests, a test that runs
them, and sample input for "broker plugin test". The module requires only the sdk,
`+sdkModule+`; --sdk-path points it at a local copy (the sdk directory
of a checkout of the broker's repository).
`, stderr)
	var (
		modPath = fs.String("module", "", "the new module's path (default: example.com/<dir's name>)")
		sdkPath = fs.String("sdk-path", "", "use the sdk in this directory (a replace directive) instead of a published version")
	)
	if code := parse(args, 2); code >= 0 {
		return code
	}
	kind, dir := fs.Arg(0), fs.Arg(1)
	samples := ""
	for _, k := range pluginKinds {
		if k.kind == kind {
			samples = k.samples
		}
	}
	if samples == "" {
		fmt.Fprintf(stderr, "broker plugin new: kind %q is not filter, allocate, txncheck or transform\n", kind)
		return 2
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		fmt.Fprintln(stderr, "broker plugin new:", err)
		return 1
	}
	name := filepath.Base(abs)
	if !pluginName.MatchString(name) {
		fmt.Fprintf(stderr, "broker plugin new: %q does not make a plugin name: use lower-case letters, digits, - and _, starting with a letter\n", name)
		return 2
	}
	if *modPath == "" {
		*modPath = "example.com/" + name
	}
	gomod, err := pluginGoMod(*modPath, *sdkPath)
	if err != nil {
		fmt.Fprintln(stderr, "broker plugin new:", err)
		return 2
	}
	if entries, err := os.ReadDir(abs); err == nil && len(entries) > 0 {
		fmt.Fprintf(stderr, "broker plugin new: %s exists and is not empty\n", dir)
		return 1
	}
	files := map[string][]byte{"go.mod": gomod}
	root := path.Join("plugintemplates", kind)
	err = walkTemplates(root, func(p string, b []byte) {
		rel := strings.TrimPrefix(p, root+"/")
		if name2, ok := strings.CutSuffix(rel, ".tmpl"); ok {
			rel, b = name2, bytes.ReplaceAll(b, []byte("__NAME__"), []byte(name))
		}
		files[rel] = b
	})
	if err == nil {
		err = os.MkdirAll(abs, 0o755)
	}
	var written []string
	for _, f := range []string{"go.mod", "main.go", "main_test.go", samples} {
		if err != nil {
			break
		}
		err = os.WriteFile(filepath.Join(abs, f), files[f], 0o644)
		written = append(written, f)
	}
	if err != nil {
		fmt.Fprintln(stderr, "broker plugin new:", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s (kind %s): %s\nnext:\n", dir, kind, strings.Join(written, ", "))
	if *sdkPath == "" {
		fmt.Fprintf(stdout, "  go -C %s get %s@latest   # add the sdk\n", dir, sdkModule)
	}
	expr := ""
	if kind == "filter" {
		expr = " --expr 'region=eu'"
	}
	fmt.Fprintf(stdout, "  go -C %s test ./...\n  broker plugin build %s\n  broker plugin test %s --kind %s%s --messages %s\n",
		dir, dir, filepath.Join(dir, name+".wasm"), kind, expr, filepath.Join(dir, samples))
	return 0
}

// walkTemplates calls fn with every file under root of the embedded templates.
func walkTemplates(root string, fn func(p string, b []byte)) error {
	return fs.WalkDir(pluginTemplates, root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := pluginTemplates.ReadFile(p)
		if err == nil {
			fn(p, b)
		}
		return err
	})
}

// pluginGoMod returns the go.mod of a new plugin module: with sdkPath, one
// that requires the sdk in that directory through a replace directive;
// without, one that requires nothing yet (the author adds a published sdk
// with go get).
func pluginGoMod(modPath, sdkPath string) ([]byte, error) {
	var b bytes.Buffer
	// go 1.24 brought go:wasmexport, which the sdk's exports need.
	fmt.Fprintf(&b, "module %s\n\ngo 1.24.0\n", modPath)
	if sdkPath == "" {
		return b.Bytes(), nil
	}
	abs, err := filepath.Abs(sdkPath)
	if err != nil {
		return nil, err
	}
	mod, err := os.ReadFile(filepath.Join(abs, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("--sdk-path %s: %w", sdkPath, err)
	}
	if first, _, _ := strings.Cut(string(mod), "\n"); strings.TrimSpace(first) != "module "+sdkModule {
		return nil, fmt.Errorf("--sdk-path %s: its go.mod is not the module %s", sdkPath, sdkModule)
	}
	fmt.Fprintf(&b, "\nrequire %s v0.0.0-00010101000000-000000000000\n\nreplace %s => %s\n", sdkModule, sdkModule, abs)
	return b.Bytes(), nil
}

func runPluginBuild(args []string, stdout, stderr io.Writer) int {
	fs, parse := pluginFlags("build", "<dir>", `Builds the plugin module in dir into a WebAssembly module, a WASI reactor:
  GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o <dir>/<dir's name>.wasm .
with the go command on PATH, and prints its sha256 for the plugins: entry.
`, stderr)
	out := fs.StringP("output", "o", "", "the module's file (default: <dir>/<dir's name>.wasm)")
	if code := parse(args, 1); code >= 0 {
		return code
	}
	dir := fs.Arg(0)
	abs, err := filepath.Abs(dir)
	if err != nil {
		fmt.Fprintln(stderr, "broker plugin build:", err)
		return 1
	}
	if *out == "" {
		*out = filepath.Join(dir, filepath.Base(abs)+".wasm")
	}
	absOut, err := filepath.Abs(*out)
	if err != nil {
		fmt.Fprintln(stderr, "broker plugin build:", err)
		return 1
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintln(stderr, "broker plugin build: the go command is needed:", err)
		return 1
	}
	cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-trimpath", "-o", absOut, ".")
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if msg, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(stderr, "broker plugin build: go build: %v\n%s", err, msg)
		return 1
	}
	b, err := os.ReadFile(absOut)
	if err != nil {
		fmt.Fprintln(stderr, "broker plugin build:", err)
		return 1
	}
	sum := sha256.Sum256(b)
	fmt.Fprintf(stdout, "built %s (%d bytes)\nsha256: %s\n", *out, len(b), hex.EncodeToString(sum[:]))
	return 0
}

// sampleMessage is one line of a filter's or a transaction policy's sample
// file.
type sampleMessage struct {
	Topic      string            `json:"topic"`
	Tags       string            `json:"tags"`
	Keys       string            `json:"keys"`
	Properties map[string]string `json:"properties"`
	Body       string            `json:"body"`
	// Compressed stores the body zlib-compressed, as clients send large
	// bodies.
	Compressed bool `json:"compressed"`
	// The transaction policy's fields.
	ProducerGroup  string `json:"producerGroup"`
	MsgID          string `json:"msgId"`
	CheckTimes     int32  `json:"checkTimes"`
	BornTimestamp  int64  `json:"bornTimestamp"`
	StoreTimestamp int64  `json:"storeTimestamp"`
	Now            int64  `json:"now"` // ms; 0: the clock
}

// sampleRequest is one line of an allocation strategy's sample file.
type sampleRequest struct {
	Group   string   `json:"group"`
	Client  string   `json:"client"`
	Clients []string `json:"clients"`
	Queues  []struct {
		Topic   string `json:"topic"`
		Broker  string `json:"broker"`
		QueueID int32  `json:"queueId"`
	} `json:"queues"`
}

func runPluginTest(args []string, stdout, stderr io.Writer) int {
	fs, parse := pluginFlags("test", "<module.wasm> --messages FILE", `Loads the module as the broker does (ABI check, init, self-tests) and runs it on the
samples in FILE, one JSON object a line ("-": standard input), printing each result:
  filter    {"topic", "tags", "keys", "properties": {…}, "body", "compressed"}: match or
            no match, for each --expr
  allocate  {"group", "client", "clients": […], "queues": [{"topic", "broker", "queueId"}]}:
            the client's queues
  txncheck  {"producerGroup", "topic", "msgId", "checkTimes", "storeTimestamp",
            "properties", "now"}: the decision
  transform {"topic", "tags", "keys", "properties": {…}, "body", "compressed"}: passed,
            changed (and to what) or rejected (and why)
Exits 1 if the module fails to load or a call fails.
`, stderr)
	var (
		kind      = fs.String("kind", "filter", "the kind to load the module for: filter, allocate, txncheck or transform")
		messages  = fs.String("messages", "", "the samples, JSON lines (required)")
		exprs     = fs.StringArray("expr", nil, "a filter expression to run the messages through (filter: at least one; repeatable)")
		config    = fs.String("config", "", "the plugin's config, passed to broker_init as the plugins: entry's config would be")
		env       = fs.StringArray("env", nil, "KEY=VALUE in the module's environment (repeatable)")
		untrusted = fs.Bool("untrusted", false, "run as an untrusted plugin: under the deadline, as trusted: false does")
	)
	if code := parse(args, 1); code >= 0 {
		return code
	}
	k := wasm.Kind(*kind)
	switch {
	case k != wasm.KindFilter && k != wasm.KindAllocate && k != wasm.KindTxnCheck && k != wasm.KindTransform:
		fmt.Fprintf(stderr, "broker plugin test: kind %q is not filter, allocate, txncheck or transform\n", *kind)
		return 2
	case *messages == "":
		fmt.Fprintln(stderr, "broker plugin test: --messages required")
		return 2
	case k == wasm.KindFilter && len(*exprs) == 0:
		fmt.Fprintln(stderr, "broker plugin test: --expr required for a filter")
		return 2
	case k != wasm.KindFilter && len(*exprs) > 0:
		fmt.Fprintln(stderr, "broker plugin test: --expr is for filters")
		return 2
	}
	lines, err := readSampleLines(*messages)
	if err != nil {
		fmt.Fprintln(stderr, "broker plugin test:", err)
		return 1
	}
	file := fs.Arg(0)
	o := wasm.Options{
		Name:      strings.TrimSuffix(filepath.Base(file), ".wasm"),
		Kind:      k,
		Path:      file,
		Untrusted: *untrusted,
		Env:       map[string]string{},
	}
	if *config != "" {
		o.Config = []byte(*config)
	}
	for _, kv := range *env {
		key, v, ok := strings.Cut(kv, "=")
		if !ok {
			fmt.Fprintf(stderr, "broker plugin test: --env %q is not KEY=VALUE\n", kv)
			return 2
		}
		o.Env[key] = v
	}
	// The plugin's own log lines (sdk.Log) and the host's, without times.
	o.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{
		Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	}))
	ctx := context.Background()
	p, err := wasm.Load(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "broker plugin test:", err)
		return 1
	}
	defer p.Close(ctx)
	s := p.Stats()
	version := s.Version
	if version == "" {
		version = "(none)"
	}
	fmt.Fprintf(stdout, "%s: %s plugin, ABI v%d.%d, version %s: init and self-tests passed\n",
		file, s.Kind, s.ABI, s.ABIMinor, version)
	switch k {
	case wasm.KindFilter:
		err = testFilter(p, *exprs, lines, stdout)
	case wasm.KindAllocate:
		err = testAllocate(ctx, p, lines, stdout)
	case wasm.KindTransform:
		err = testTransform(ctx, p, lines, stdout)
	default:
		err = testTxnCheck(ctx, p, lines, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "broker plugin test:", err)
		return 1
	}
	return 0
}

// sampleLine is one non-blank line of a sample file and its line number.
type sampleLine struct {
	n    int
	text []byte
}

// readSampleLines reads the non-blank lines of file ("-": standard input).
func readSampleLines(file string) ([]sampleLine, error) {
	var r io.Reader = os.Stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	var lines []sampleLine
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for n := 1; sc.Scan(); n++ {
		if t := bytes.TrimSpace(sc.Bytes()); len(t) > 0 {
			lines = append(lines, sampleLine{n, bytes.Clone(t)})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%s: no samples", file)
	}
	return lines, nil
}

// decodeSample decodes one line into v, refusing fields v does not have.
func decodeSample(l sampleLine, v any) error {
	dec := json.NewDecoder(bytes.NewReader(l.text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("line %d: %w", l.n, err)
	}
	return nil
}

// sampleProperties returns m's properties with TAGS and KEYS added unless
// they are set.
func sampleProperties(m *sampleMessage) map[string]string {
	props := map[string]string{}
	if m.Tags != "" {
		props[message.PropertyTags] = m.Tags
	}
	if m.Keys != "" {
		props[message.PropertyKeys] = m.Keys
	}
	for k, v := range m.Properties {
		props[k] = v
	}
	return props
}

func testFilter(p *wasm.Plugin, exprs []string, lines []sampleLine, stdout io.Writer) error {
	batch := make([]message.Record, len(lines))
	descs := make([]string, len(lines))
	now := time.Now().UnixMilli()
	for i, l := range lines {
		var m sampleMessage
		if err := decodeSample(l, &m); err != nil {
			return err
		}
		if m.Topic == "" {
			return fmt.Errorf("line %d: no topic", l.n)
		}
		msg := message.Message{
			Topic: m.Topic, QueueOffset: int64(i), BornTimestamp: now, StoreTimestamp: now,
			Body: []byte(m.Body), Properties: message.EncodeProperties(sampleProperties(&m)),
		}
		if m.Compressed {
			var b bytes.Buffer
			w := zlib.NewWriter(&b)
			w.Write(msg.Body)
			w.Close()
			msg.Body, msg.SysFlag = b.Bytes(), message.SysFlagCompressed
		}
		r, err := message.AppendRecord(nil, &msg)
		if err != nil {
			return fmt.Errorf("line %d: %w", l.n, err)
		}
		batch[i] = r
		descs[i] = "topic " + m.Topic
		if m.Tags != "" {
			descs[i] += ", tags " + m.Tags
		}
		if m.Keys != "" {
			descs[i] += ", keys " + m.Keys
		}
	}
	got := make([]bool, len(batch))
	for _, expr := range exprs {
		f, err := p.Filter(expr)
		if err != nil {
			return err
		}
		if err := f.Match(batch, got); err != nil {
			return fmt.Errorf("expression %q: %w", expr, err)
		}
		fmt.Fprintf(stdout, "expression %q:\n", expr)
		n := 0
		for i, ok := range got {
			res := "no match"
			if ok {
				res, n = "match", n+1
			}
			fmt.Fprintf(stdout, "  line %d: %-8s  %s\n", lines[i].n, res, descs[i])
		}
		fmt.Fprintf(stdout, "  %d of %d match\n", n, len(got))
	}
	return nil
}

func testAllocate(ctx context.Context, p *wasm.Plugin, lines []sampleLine, stdout io.Writer) error {
	for _, l := range lines {
		var r sampleRequest
		if err := decodeSample(l, &r); err != nil {
			return err
		}
		req := wasm.AllocateRequest{Group: r.Group, ClientID: r.Client, Clients: r.Clients}
		for _, q := range r.Queues {
			req.Queues = append(req.Queues, wasm.Queue{Topic: q.Topic, BrokerName: q.Broker, QueueID: q.QueueID})
		}
		qs, err := p.AllocateQueues(ctx, req)
		if err != nil {
			return fmt.Errorf("line %d: %w", l.n, err)
		}
		names := make([]string, len(qs))
		for i, q := range qs {
			names[i] = fmt.Sprintf("%s@%s/%d", q.Topic, q.BrokerName, q.QueueID)
		}
		fmt.Fprintf(stdout, "line %d: %s of group %s gets %d of %d queues: %s\n",
			l.n, r.Client, r.Group, len(qs), len(req.Queues), strings.Join(names, " "))
	}
	return nil
}

func testTxnCheck(ctx context.Context, p *wasm.Plugin, lines []sampleLine, stdout io.Writer) error {
	for _, l := range lines {
		var m sampleMessage
		if err := decodeSample(l, &m); err != nil {
			return err
		}
		now := time.Now()
		if m.Now != 0 {
			now = time.UnixMilli(m.Now)
		}
		props := sampleProperties(&m)
		h := []wasm.HalfMessage{{
			ProducerGroup: m.ProducerGroup, Topic: m.Topic, MsgID: m.MsgID, CheckTimes: m.CheckTimes,
			BornTimestamp: m.BornTimestamp, StoreTimestamp: m.StoreTimestamp,
			Properties: message.EncodeProperties(props),
		}}
		out := make([]wasm.TxnDecision, 1)
		if err := p.TxnCheck(ctx, now, h, out); err != nil {
			return fmt.Errorf("line %d: %w", l.n, err)
		}
		d := out[0].Action.String()
		if out[0].Action == wasm.TxnWait {
			d += " " + out[0].Wait.String()
		}
		fmt.Fprintf(stdout, "line %d: %s (msgId %s, %d checks so far)\n", l.n, d, m.MsgID, m.CheckTimes)
	}
	return nil
}

func testTransform(ctx context.Context, p *wasm.Plugin, lines []sampleLine, stdout io.Writer) error {
	for _, l := range lines {
		var m sampleMessage
		if err := decodeSample(l, &m); err != nil {
			return err
		}
		if m.Topic == "" {
			return fmt.Errorf("line %d: no topic", l.n)
		}
		msg := wasm.TransformMessage{Topic: m.Topic, Body: []byte(m.Body), Properties: message.EncodeProperties(sampleProperties(&m))}
		if m.Compressed {
			var b bytes.Buffer
			w := zlib.NewWriter(&b)
			w.Write(msg.Body)
			w.Close()
			msg.Body, msg.SysFlag = b.Bytes(), message.SysFlagCompressed
		}
		out := make([]wasm.TransformResult, 1)
		if err := p.Transform(ctx, []wasm.TransformMessage{msg}, out); err != nil {
			return fmt.Errorf("line %d: %w", l.n, err)
		}
		r := &out[0]
		switch {
		case r.Reject:
			fmt.Fprintf(stdout, "line %d: rejected: %s\n", l.n, r.Reason)
		case !r.Changed():
			fmt.Fprintf(stdout, "line %d: passed unchanged (topic %s)\n", l.n, m.Topic)
		default:
			var what []string
			if r.Topic != "" {
				what = append(what, "topic "+r.Topic)
			}
			if r.Properties != nil {
				props := r.Properties.Map()
				keys := slices.Sorted(maps.Keys(props))
				for i, k := range keys {
					keys[i] = k + "=" + props[k]
				}
				what = append(what, "properties "+strings.Join(keys, " "))
			}
			if r.Body != nil {
				what = append(what, fmt.Sprintf("body %q", r.Body))
			}
			fmt.Fprintf(stdout, "line %d: changed: %s\n", l.n, strings.Join(what, ", "))
		}
	}
	return nil
}
