package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// A documented command is checked against the flags the command defines:
// each is parsed with a flag set built from the usage that "<command> -h"
// prints, so nothing runs, and a flag renamed or removed in the code
// without its documentation fails the test.

// shellBlock matches a fenced shell block of a Markdown document.
var shellBlock = regexp.MustCompile("(?ms)^```(?:sh|bash|console)\n(.*?)^```")

// anyBlock matches a fenced block of any kind; codeSpan an inline code
// span.
var (
	anyBlock = regexp.MustCompile("(?ms)^```.*?^```")
	codeSpan = regexp.MustCompile("`([^`]+)`")
)

// docCommand is one broker command line found in a document.
type docCommand struct {
	where  string   // file:line
	args   []string // after "broker"
	strict bool     // from a shell block: every argument must parse
}

// TestDocumentedCommandsParse checks every broker command in the shell
// blocks of README.md and docs/*.md, and every concrete one in their inline
// code: its subcommand exists and each flag it gives is one the command
// defines, with a value of the flag's type.
func TestDocumentedCommandsParse(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	var cmds []docCommand
	blocks := 0
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../../")
		for _, m := range shellBlock.FindAllSubmatchIndex(doc, -1) {
			blocks++
			line := 1 + bytes.Count(doc[:m[2]], []byte("\n"))
			cmds = append(cmds, shellCommands(name, line, string(doc[m[2]:m[3]]))...)
		}
		cmds = append(cmds, inlineCommands(name, string(anyBlock.ReplaceAll(doc, nil)))...)
	}
	if blocks < 10 || len(cmds) < 25 {
		t.Fatalf("%d shell blocks, %d broker commands found; is the extraction broken?", blocks, len(cmds))
	}
	strict := 0
	for _, c := range cmds {
		if c.strict {
			strict++
		}
	}
	t.Logf("%d broker commands: %d from shell blocks, %d from running text", len(cmds), strict, len(cmds)-strict)
	usages := usageCache{}
	for _, c := range cmds {
		if err := checkCommand(usages, c.args, c.strict); err != nil {
			t.Errorf("%s: broker %s: %v", c.where, strings.Join(c.args, " "), err)
		}
	}
}

// shellCommands returns the broker commands of a shell block that starts
// at line first of file: continuation lines joined, comments dropped,
// pipelines and lists split, variables the block assigns (and a for
// loop's first value) expanded.
func shellCommands(file string, first int, block string) []docCommand {
	vars := map[string]string{}
	forLoop := regexp.MustCompile(`^for (\w+) in (\S+)`)
	assign := regexp.MustCompile(`^(\w+)=(\S+)$`)
	var cmds []docCommand
	lines := strings.Split(block, "\n")
	for i := 0; i < len(lines); i++ {
		start := i
		line := lines[i]
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, "\\") + " " + lines[i]
		}
		line = strings.TrimPrefix(strings.TrimSpace(stripComment(line)), "$ ")
		if m := forLoop.FindStringSubmatch(line); m != nil {
			vars[m[1]] = m[2]
			continue
		}
		if m := assign.FindStringSubmatch(line); m != nil {
			vars[m[1]] = m[2]
			continue
		}
		line = os.Expand(line, func(k string) string { return vars[k] })
		for _, part := range commandSeparator.Split(line, -1) {
			if args, ok := brokerArgs(splitWords(part)); ok {
				cmds = append(cmds, docCommand{fmt.Sprintf("%s:%d", file, first+start), args, true})
			}
		}
	}
	return cmds
}

// commandSeparator separates the commands of a shell list or pipeline.
// A redirection ends a command's arguments too.
var commandSeparator = regexp.MustCompile(`&&|\|\||[|;&]|\d?>>?`)

// inlineCommands returns the broker commands of doc's inline code that
// hold no placeholder (brackets, alternatives, ellipses, angle brackets),
// run as they are or under time or environment settings.
func inlineCommands(file, doc string) []docCommand {
	var cmds []docCommand
	for _, m := range codeSpan.FindAllStringSubmatchIndex(doc, -1) {
		text := doc[m[2]:m[3]]
		if strings.ContainsAny(text, "[]|<>…") || strings.Contains(text, "...") {
			continue
		}
		words := splitWords(commandSeparator.Split(text, 2)[0])
		for len(words) > 0 && (strings.Contains(words[0], "=") || words[0] == "/usr/bin/time" || words[0] == "time") {
			words = words[1:]
		}
		if args, ok := brokerArgs(words); ok {
			line := 1 + strings.Count(doc[:m[0]], "\n")
			cmds = append(cmds, docCommand{fmt.Sprintf("%s:%d (inline)", file, line), args, false})
		}
	}
	return cmds
}

// stripComment drops a shell comment: a # at the start of a word, outside
// quotes.
func stripComment(line string) string {
	var quote rune
	for i, r := range line {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '"' || r == '\'':
			quote = r
		case r == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t'):
			return line[:i]
		}
	}
	return line
}

// splitWords splits a command line into words as a shell does for plain
// words and quoted strings (no escapes, no expansion).
func splitWords(s string) []string {
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// brokerArgs returns the arguments of a broker command: the words after
// "broker" or "go run ./cmd/broker".
func brokerArgs(words []string) ([]string, bool) {
	switch {
	case len(words) >= 1 && words[0] == "broker":
		return words[1:], true
	case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/broker":
		return words[3:], true
	}
	return nil, false
}

// usageCache holds the usage text that "broker <command> -h" printed.
type usageCache map[string]string

// flags returns a flag set with the flags that "broker <command...> -h"
// lists, or an error when the command does not answer -h.
func (u usageCache) flags(command ...string) (*pflag.FlagSet, error) {
	key := strings.Join(command, " ")
	text, ok := u[key]
	if !ok {
		var stderr bytes.Buffer
		if code := run(append(slices.Clone(command), "-h"), io.Discard, &stderr); code != 0 {
			return nil, fmt.Errorf("broker %s -h: exit %d: %s", key, code, firstLine(stderr.String()))
		}
		text = stderr.String()
		u[key] = text
	}
	return flagsFromUsage(text), nil
}

// usageFlag matches a flag's line in pflag's usage: its name and, unless
// it is a bool flag, its type.
var usageFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([\w-]+)(\[=[^\]]*\])?(?: (\w+))?\s`)

// flagsFromUsage builds a flag set from pflag's usage text, each flag of
// the type named there.
func flagsFromUsage(text string) *pflag.FlagSet {
	if _, after, ok := strings.Cut(text, "Flags:"); ok {
		text = after
	}
	fs := pflag.NewFlagSet("doc", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, m := range usageFlag.FindAllStringSubmatch(text, -1) {
		name, typ := m[1], m[3]
		if m[2] != "" {
			typ = "" // --name[=true|false]: a bool flag
		}
		if fs.Lookup(name) != nil {
			continue
		}
		switch typ {
		case "":
			fs.Bool(name, false, "")
		case "int", "int64":
			fs.Int64(name, 0, "")
		case "duration":
			fs.Duration(name, 0, "")
		case "float", "float64":
			fs.Float64(name, 0, "")
		default:
			fs.String(name, "", "")
		}
	}
	return fs
}

// checkCommand parses a documented broker command's arguments against the
// flags the command defines. Strict, every argument must parse and none
// may be left over; otherwise (a command named in running text) only the
// subcommand and the names of the flags given are checked, and a command
// named without its subcommand passes.
func checkCommand(u usageCache, args []string, strict bool) error {
	command, rest, err := resolveCommand(u, args, strict)
	if err != nil || command == nil {
		return err
	}
	fs, err := u.flags(command...)
	if err != nil {
		return err
	}
	if !strict {
		for _, a := range rest {
			if name, ok := strings.CutPrefix(a, "--"); ok {
				name, _, _ = strings.Cut(name, "=")
				if fs.Lookup(name) == nil {
					return fmt.Errorf("unknown flag: --%s", name)
				}
			}
		}
		return nil
	}
	if err := fs.Parse(rest); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// resolveCommand splits a broker command's arguments into the subcommand
// (nil: nothing to check) and the arguments left for its flags.
func resolveCommand(u usageCache, args []string, strict bool) (command, rest []string, err error) {
	incomplete := func(what string) ([]string, []string, error) {
		if strict {
			return nil, nil, errors.New("no " + what)
		}
		return nil, nil, nil
	}
	switch {
	case len(args) > 0 && args[0] == "help":
		return nil, nil, nil
	case len(args) > 0 && args[0] == "namesrv":
		return args[:1], args[1:], nil
	case len(args) > 0 && (args[0] == "healthcheck" || args[0] == "import"):
		return args[:1], args[1:], nil
	case len(args) > 1 && args[0] == "config" && args[1] == "check":
		return args[:2], nil, nil // its arguments are files
	case len(args) > 0 && (args[0] == "bench" || args[0] == "config"):
		if len(args) < 2 || strings.HasPrefix(args[1], "-") {
			return incomplete(args[0] + " mode")
		}
		return args[:2], args[2:], nil
	case len(args) > 0 && args[0] == "plugin":
		// A verb, then its arguments (files and a kind) among its flags.
		if len(args) < 2 || strings.HasPrefix(args[1], "-") {
			return incomplete("plugin verb")
		}
		if !strict {
			return args[:2], args[2:], nil
		}
		fs, err := u.flags(args[:2]...)
		if err != nil {
			return nil, nil, err
		}
		if err := fs.Parse(args[2:]); err != nil {
			return nil, nil, err
		}
		if want := map[string]int{"new": 2, "build": 1, "test": 1}[args[1]]; fs.NArg() != want {
			return nil, nil, fmt.Errorf("broker plugin %s takes %d argument(s), got %q", args[1], want, fs.Args())
		}
		return args[:2], nil, nil
	case len(args) > 0 && args[0] == "admin":
		// The global flags come first and end at the group and verb.
		global, err := u.flags("admin")
		if err != nil {
			return nil, nil, err
		}
		global.SetInterspersed(false)
		if err := global.Parse(args[1:]); err != nil {
			return nil, nil, err
		}
		if global.NArg() < 2 {
			return incomplete("group and verb")
		}
		return []string{"admin", global.Arg(0), global.Arg(1)}, global.Args()[2:], nil
	}
	return []string{}, args, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestCheckCommandCatches proves a documented command with a flag the
// command lacks, a bad value, an unknown subcommand or a stray argument
// fails, and that good ones of each kind pass.
func TestCheckCommandCatches(t *testing.T) {
	u := usageCache{}
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{"go run ./cmd/broker --data-dir /tmp/rmq", true},
		{"broker --set-name a --node-id n0 --peers n0=127.0.0.1:7000 --namesrv-listen \"\"", true},
		{"broker namesrv --listen 127.0.0.1:9876", true},
		{"broker admin --json consumers progress --group billing", true},
		{"broker admin topics create --topic T --read-queues 8", true},
		{"broker bench produce --conns 64 --duration 5s", true},
		{"broker namesrv --namesrv-listen 127.0.0.1:9876", false},
		{"broker --no-such-flag", false},
		{"broker admin topics create --topic T --read-queues eight", false},
		{"broker admin topics explode --topic T", false},
		{"broker admin topics route --topic T extra", false},
		{"broker bench produce --duration soon", false},
	} {
		args, _ := brokerArgs(splitWords(c.line))
		if err := checkCommand(u, args, true); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.line, err, c.ok)
		}
	}
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{"broker admin", true},
		{"broker bench", true},
		{"broker admin topics create --cluster", true},
		{"broker admin topics create --clusters", false},
		{"broker admin topics explode", false},
	} {
		args, _ := brokerArgs(splitWords(c.line))
		if err := checkCommand(u, args, false); (err == nil) != c.ok {
			t.Errorf("running text %s: %v, want ok=%v", c.line, err, c.ok)
		}
	}
	cmds := shellCommands("x.md", 1, "peers=n0=h:1\nfor i in 0 1; do\n  go run ./cmd/broker --node-id n$i \\\n    --peers $peers &  # comment\ndone\nbroker admin --json consumers progress --group g | jq .lag\n")
	if len(cmds) != 2 || strings.Join(cmds[0].args, " ") != "--node-id n0 --peers n0=h:1" || cmds[0].where != "x.md:3" ||
		strings.Join(cmds[1].args, " ") != "admin --json consumers progress --group g" {
		t.Fatalf("shell commands %+v", cmds)
	}
}

// flagRow matches a row of a flag table: | `--name` | ….
var flagRow = regexp.MustCompile("(?m)^\\| `--([\\w-]+)` \\|")

// TestFlagTablesMatchFlags checks the flag tables of docs/operations.md
// against the flags the broker and "broker namesrv" define: every flag has
// a row, and every row a flag.
func TestFlagTablesMatchFlags(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	u := usageCache{}
	for _, c := range []struct {
		heading string
		command []string
	}{
		{"## Flags of the broker\n", nil},
		{"## Flags of a name server alone\n", []string{"namesrv"}},
	} {
		_, section, ok := strings.Cut(string(doc), c.heading)
		if !ok {
			t.Fatalf("docs/operations.md has no %q", strings.TrimSpace(c.heading))
		}
		if i := strings.Index(section, "\n## "); i >= 0 {
			section = section[:i]
		}
		fs, err := u.flags(c.command...)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range flagTableProblems(fs, section) {
			t.Errorf("docs/operations.md %s: %s", strings.TrimSpace(c.heading), p)
		}
	}
}

// flagTableProblems lists the flags of fs without a row in section and
// the rows naming no flag of fs.
func flagTableProblems(fs *pflag.FlagSet, section string) []string {
	var problems []string
	rows := map[string]bool{}
	for _, m := range flagRow.FindAllStringSubmatch(section, -1) {
		rows[m[1]] = true
		if fs.Lookup(m[1]) == nil {
			problems = append(problems, "row --"+m[1]+" names no flag")
		}
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if !rows[f.Name] {
			problems = append(problems, "flag --"+f.Name+" has no row")
		}
	})
	return problems
}

// TestFlagTableProblemsCatches proves a missing row and a stale row are
// both reported.
func TestFlagTableProblemsCatches(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.String("listen", "", "")
	fs.String("grpc-listen", "", "")
	if p := flagTableProblems(fs, "| `--listen` | a |\n| `--grpc-listen` | b |\n"); len(p) != 0 {
		t.Fatalf("complete table reported: %q", p)
	}
	if p := flagTableProblems(fs, "| `--listen` | a |\n| `--namesrv-listen` | b |\n"); len(p) != 2 {
		t.Fatalf("got %q, want a stale row and a missing flag", p)
	}
}
