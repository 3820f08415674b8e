//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/server"
)

// The shell blocks of README.md and docs/*.md run, as written, in bash:
// TestDocumentedBlocksRun runs each one in a fresh directory, with this
// test binary on PATH as "broker" and as "go" (TestMain dispatches on the
// name it is run by), so a documented command runs the broker of this
// package, and a flag renamed in the code without its documentation fails
// the block.
//
// The conventions, for whoever writes a block:
//
//   - A block runs unless the line above its fence is
//     <!-- norun: REASON -->, the reason saying why (docker, sudo, the
//     network outside loopback, files outside the work directory) and,
//     where there is one, which test covers it instead.
//   - <!-- setup: SHELL --> above a fence runs SHELL first, unseen by
//     the reader: "broker &" for a block that asks a running broker.
//   - A broker or name server (broker or go run ./cmd/broker with no
//     subcommand, or namesrv) runs in the background whether the block
//     puts it there with & or, as a reader in a terminal of its own would,
//     runs it in the foreground. Every command of this package after it
//     waits until each background one is ready (its /readyz answers 200,
//     or without HTTP its listener accepts). At the end of the block each
//     gets SIGTERM and must exit 0.
//   - Addresses: each port a block names (127.0.0.1:10911, :9876,
//     n0=127.0.0.1:7000), and each default one a command would take, is
//     mapped to a free port picked when the document first names it, the
//     same for every block of the document; servers have their
//     configuration's addresses mapped after the flags and the config
//     file are read, other commands their arguments, and a default
//     address (--broker, --namesrv, --addr) is given explicitly. So a
//     document's fixed ports never collide with anything on the machine.
//   - go run ./cmd/broker is the broker command; go run ./examples/...
//     builds the example from the repository and runs it in the block's
//     directory; go test is not run (CI runs the suite itself, and the
//     README's test command is CI's).
//
// The environment of a block's commands.
const (
	envDocState = "RMQ_DOCTEST_DIR"   // the block's state: pids, readiness, exit codes
	envDocPorts = "RMQ_DOCTEST_PORTS" // the document's port map
	envDocRepo  = "RMQ_DOCTEST_REPO"  // the repository's root
	envDocGo    = "RMQ_DOCTEST_GO"    // the real go command
)

// docMain is TestMain's part: the test binary run by a block as broker or
// go. ok is false when it is not.
func docMain() (code int, ok bool) {
	if os.Getenv(envDocState) == "" {
		return 0, false
	}
	switch filepath.Base(os.Args[0]) {
	case "broker":
		return docExit(docBroker(os.Args[1:])), true
	case "go":
		return docExit(docGo(os.Args[1:])), true
	}
	return 0, false
}

// docExit records a command's exit code for the harness, which checks a
// background server's after stopping it.
func docExit(code int) int {
	os.WriteFile(docState(fmt.Sprintf("exit-%d", os.Getpid())), []byte(strconv.Itoa(code)), 0o644)
	return code
}

func docState(name string) string { return filepath.Join(os.Getenv(envDocState), name) }

// docBroker runs the broker command for a block, its addresses mapped.
func docBroker(args []string) int {
	switch {
	case len(args) == 0 || strings.HasPrefix(args[0], "-"):
		cfg, pprofAddr, code := brokerConfig(args, os.Stderr)
		if code >= 0 {
			return code
		}
		if cfg.Listen == "" {
			cfg.Listen = server.DefaultListen
		}
		for _, a := range []*string{&cfg.Listen, &cfg.Advertise, &cfg.NamesrvListen, &cfg.GRPCListen, &cfg.HTTPListen, &pprofAddr} {
			*a = mapAddrs(*a)
		}
		for i := range cfg.NameServers {
			cfg.NameServers[i] = mapAddrs(cfg.NameServers[i])
		}
		if cfg.Cluster != nil {
			for i := range cfg.Cluster.Peers {
				cfg.Cluster.Peers[i].Addr = mapAddrs(cfg.Cluster.Peers[i].Addr)
			}
		}
		if cfg.HTTPListen != "" {
			go markReady("http://"+cfg.HTTPListen, cfg.Cluster != nil)
		} else {
			go markReady(cfg.Listen, false)
		}
		return serveBroker(cfg, pprofAddr)
	case args[0] == "namesrv":
		cfg, code := namesrvConfig(args[1:], os.Stderr)
		if code >= 0 {
			return code
		}
		cfg.NamesrvListen = mapAddrs(cfg.NamesrvListen)
		go markReady(cfg.NamesrvListen, false)
		return serveNamesrv(cfg)
	}
	if err := waitServers(); err != nil {
		fmt.Fprintln(os.Stderr, "doc test:", err)
		return 1
	}
	return run(clientArgs(args), os.Stdout, os.Stderr)
}

// clientArgs maps the addresses of a command that is not a server, and
// gives the default ones (the broker's, the name server's, the HTTP
// endpoint's) it would take explicitly.
func clientArgs(args []string) []string {
	args = slices.Clone(args)
	for i := range args {
		args[i] = mapAddrs(args[i])
	}
	given := func(name string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return a == "--"+name || strings.HasPrefix(a, "--"+name+"=") })
	}
	u := usageCache{}
	command, _, err := resolveCommand(u, args, true)
	if err != nil || len(command) == 0 {
		return args // the command itself reports it
	}
	if command[0] == "admin" && !given("broker") {
		args = slices.Insert(args, 1, "--broker="+mapAddrs(server.DefaultListen))
	}
	fs, err := u.flags(command...)
	if err != nil {
		return args
	}
	for name, addr := range map[string]string{"broker": server.DefaultListen, "namesrv": server.DefaultNamesrvListen, "addr": server.DefaultHTTPListen} {
		if fs.Lookup(name) != nil && !given(name) {
			args = append(args, "--"+name+"="+mapAddrs(addr))
		}
	}
	return args
}

// docGo runs the go command for a block: go run ./cmd/broker is the
// broker command, go run of another package of the repository builds it
// and runs it, go test does not run, and the rest goes to the real go.
func docGo(args []string) int {
	switch {
	case len(args) >= 2 && args[0] == "run" && args[1] == "./cmd/broker":
		return docBroker(args[2:])
	case len(args) >= 1 && args[0] == "test":
		fmt.Fprintln(os.Stderr, "doc test: go test is not run here: CI runs the suite itself")
		return 0
	case len(args) >= 2 && args[0] == "run" && strings.HasPrefix(args[1], "./"):
		bin := docState(filepath.Base(args[1]))
		build := exec.Command(os.Getenv(envDocGo), "build", "-o", bin, args[1])
		build.Dir, build.Stdout, build.Stderr = os.Getenv(envDocRepo), os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "doc test: go build", args[1]+":", err)
			return 1
		}
		if err := waitServers(); err != nil {
			fmt.Fprintln(os.Stderr, "doc test:", err)
			return 1
		}
		rest := slices.Clone(args[2:])
		for i := range rest {
			rest[i] = mapAddrs(rest[i])
		}
		return runExit(exec.Command(bin, rest...))
	}
	return runExit(exec.Command(os.Getenv(envDocGo), args...))
}

// runExit runs cmd with this process's standard files and returns its
// exit code.
func runExit(cmd *exec.Cmd) int {
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	fmt.Fprintln(os.Stderr, "doc test:", err)
	return 1
}

// markReady records that this server is ready once target answers: an
// HTTP endpoint with 200 on /readyz (or, for a member of a replicated set,
// which is ready only while it leads, a leader and the replica it serves
// in /cluster),
// or an address by accepting a connection.
func markReady(target string, member bool) {
	start, told := time.Now(), false
	for {
		var why string
		if strings.HasPrefix(target, "http://") {
			resp, err := http.Get(target + "/readyz")
			if err != nil {
				why = err.Error()
			} else {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK || member && servesReplica(target) {
					break
				}
				why = fmt.Sprintf("%s: %s", resp.Status, body)
			}
		} else if c, err := net.DialTimeout("tcp", target, time.Second); err != nil {
			why = err.Error()
		} else {
			c.Close()
			break
		}
		if !told && time.Since(start) > 10*time.Second {
			fmt.Fprintf(os.Stderr, "doc test: pid %d not ready after 10s: %s: %s\n", os.Getpid(), target, why)
			told = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	os.WriteFile(docState(fmt.Sprintf("ready-%d", os.Getpid())), nil, 0o644)
}

// servesReplica reports whether the set member whose HTTP endpoint is
// base serves as a replica of a set that has a leader.
func servesReplica(base string) bool {
	resp, err := http.Get(base + "/cluster")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var st struct{ Leader, Replica string }
	return json.NewDecoder(resp.Body).Decode(&st) == nil && st.Leader != "" && st.Replica != ""
}

// waitServers waits until every server the block started in the
// background is ready, or fails when one exits first.
func waitServers() error { return waitServersIn(os.Getenv(envDocState)) }

// waitServersIn is waitServers for the block whose state directory is
// state.
func waitServersIn(state string) error {
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range docPids(state) {
		for {
			if _, err := os.Stat(filepath.Join(state, fmt.Sprintf("ready-%d", pid))); err == nil {
				break
			}
			if code, err := os.ReadFile(filepath.Join(state, fmt.Sprintf("exit-%d", pid))); err == nil {
				return fmt.Errorf("background command (pid %d) exited %s before it was ready", pid, code)
			}
			if syscall.Kill(pid, 0) == syscall.ESRCH {
				break // not one of ours: nothing to wait for
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("background command (pid %d) not ready after 30s", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// docPids returns the pids of the background commands of the block whose
// state directory is state.
func docPids(state string) []int {
	data, _ := os.ReadFile(filepath.Join(state, "pids"))
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// docAddr matches a port in an address: after a host, or alone after
// the start, a separator or a quote (":9876").
var docAddr = regexp.MustCompile(`(^|[\s=,"'/@]|(?:\d{1,3}\.){3}\d{1,3}|localhost|\])(:)(\d{2,5})\b`)

// mapAddrs replaces each port in s by the one the document's map gives
// it, picking a free one for a port the map does not hold yet.
func mapAddrs(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range docAddr.FindAllStringSubmatchIndex(s, -1) {
		b.WriteString(s[last:m[6]])
		b.WriteString(mapPort(s[m[6]:m[7]]))
		last = m[7]
	}
	b.WriteString(s[last:])
	return b.String()
}

// mapPort returns the free port standing for port in this document; the
// map is a file, shared by the document's processes under a lock.
func mapPort(port string) string {
	f, err := os.OpenFile(os.Getenv(envDocPorts), os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		panic(err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		panic(err)
	}
	var taken []string
	for _, line := range strings.Split(string(data), "\n") {
		if from, to, ok := strings.Cut(line, " "); ok {
			if from == port {
				return to
			}
			taken = append(taken, to)
		}
	}
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		free := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		ln.Close()
		if !slices.Contains(taken, free) {
			fmt.Fprintf(f, "%s %s\n", port, free)
			return free
		}
	}
}

// docBlock is a shell block of a document.
type docBlock struct {
	line   int    // of the opening fence
	text   string // the block
	norun  string // why it does not run
	marked bool   // norun: it does not run
	setup  string // shell run before it
	fenced string // the fence's info string
}

// docDirective matches a directive comment above a block's fence.
var docDirective = regexp.MustCompile(`^<!--\s*(norun|setup):\s*(.*?)\s*-->$`)

// docBlocks returns doc's shell blocks with their directives.
func docBlocks(doc string) []docBlock {
	lines := strings.Split(doc, "\n")
	var blocks []docBlock
	for i := 0; i < len(lines); i++ {
		info, ok := strings.CutPrefix(lines[i], "```")
		if !ok {
			continue
		}
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
			end++
		}
		if info == "sh" || info == "bash" || info == "console" {
			b := docBlock{line: i + 1, text: strings.Join(lines[i+1:end], "\n") + "\n", fenced: info}
			for j := i - 1; j >= 0; j-- {
				m := docDirective.FindStringSubmatch(strings.TrimSpace(lines[j]))
				if m == nil {
					break
				}
				if m[1] == "norun" {
					b.norun, b.marked = m[2], true
				} else {
					b.setup = m[2] + "\n" + b.setup
				}
			}
			blocks = append(blocks, b)
		}
		i = end
	}
	return blocks
}

// trailingAmp matches a command line that ends in & (not &&), before any
// comment.
var trailingAmp = regexp.MustCompile(`(^|[^&])&\s*$`)

// docScript returns the bash script that runs a block: each command put
// in the background records its pid, and a server run in the foreground
// goes to the background.
func docScript(setup, block string) string {
	var b strings.Builder
	b.WriteString("set -e -o pipefail\n")
	b.WriteString(`__doc_bg() { echo "$1" >> "$` + envDocState + `/pids"; }` + "\n")
	lines := strings.Split(setup+block, "\n")
	logical := ""
	for _, line := range lines {
		code := strings.TrimRight(stripComment(line), " \t")
		comment := line[len(code):]
		logical += strings.TrimSuffix(code, "\\") + " "
		switch {
		case strings.HasSuffix(code, "\\"):
		case trailingAmp.MatchString(code):
			line = code + " __doc_bg $!" + comment
		default:
			if args, ok := brokerArgs(splitWords(strings.TrimSpace(logical))); ok && (len(args) == 0 || strings.HasPrefix(args[0], "-") || args[0] == "namesrv") {
				line = code + " & __doc_bg $!" + comment
			}
		}
		if !strings.HasSuffix(code, "\\") {
			logical = ""
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// TestDocumentedBlocksRun runs every shell block of README.md and
// docs/*.md that is not marked norun, as the comment above docMain
// describes, and checks every norun block gives its reason.
func TestDocumentedBlocksRun(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("the documents' shell blocks need bash:", err)
	}
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, name := range []string{"broker", "go"} {
		if err := os.Symlink(self, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	tests := repoTests(t, repo)
	ran, skipped := 0, 0
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../../")
		ports := filepath.Join(t.TempDir(), "ports")
		for _, b := range docBlocks(string(doc)) {
			where := fmt.Sprintf("%s:%d", name, b.line)
			if b.marked {
				if b.norun == "" {
					t.Errorf("%s: a norun block needs its reason: <!-- norun: REASON -->", where)
				}
				for _, name := range testName.FindAllString(b.norun, -1) {
					if !slices.Contains(tests, name) {
						t.Errorf("%s: the norun reason names %s, which no test file defines", where, name)
					}
				}
				skipped++
				continue
			}
			if b.fenced == "console" {
				t.Errorf("%s: a console block (prompts and output) cannot run: fence it sh, or mark it <!-- norun: REASON -->", where)
				continue
			}
			ran++
			t.Run(filepath.Base(where), func(t *testing.T) {
				runDocBlock(t, b, docEnv(bin, realGo, repo, ports))
			})
		}
	}
	t.Logf("%d blocks ran, %d marked norun", ran, skipped)
	if ran < 8 {
		t.Fatalf("only %d blocks ran; is the extraction broken?", ran)
	}
}

// testName matches a test's name in a norun reason.
var testName = regexp.MustCompile(`\bTest[A-Z]\w*`)

// repoTests returns the names of the tests defined in the repository
// under root, for the norun reasons that name the test covering a block.
func repoTests(t *testing.T, root string) []string {
	var names []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root:
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, "_test.go"):
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllSubmatch(src, -1) {
			names = append(names, string(m[1]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// testFunc matches a test function's declaration.
var testFunc = regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)

// docEnv is a block's environment but for its state directory.
func docEnv(bin, realGo, repo, ports string) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PATH=") })
	return append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		envDocGo+"="+realGo, envDocRepo+"="+repo, envDocPorts+"="+ports)
}

// runDocBlock runs one block in a directory of its own, then stops its
// background servers, each of which must exit 0.
func runDocBlock(t *testing.T, b docBlock, env []string) {
	work, state := t.TempDir(), t.TempDir()
	script := filepath.Join(state, "block.sh")
	if err := os.WriteFile(script, []byte(docScript(b.setup, b.text)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(state, "output"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = work, append(env, envDocState+"="+state), out, out
	// The output is a file, not a pipe: background servers keep writing
	// to it after bash exits. The block's processes share a process group
	// (bash without job control keeps its background commands in its
	// own), so whatever is left of them is killed at the end.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	runErr := cmd.Run()
	if cmd.Process != nil {
		defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	var problems []string
	if runErr != nil {
		problems = append(problems, fmt.Sprintf("the block failed: %v", runErr))
	}
	// A block may only start a server: it must get ready all the same.
	if err := waitServersIn(state); err != nil {
		problems = append(problems, err.Error())
	}
	for _, pid := range docPids(state) {
		if err := stopDocServer(state, pid); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 || testing.Verbose() {
		output, _ := os.ReadFile(out.Name())
		if len(problems) == 0 {
			t.Logf("output:\n%s", output)
			return
		}
		script, _ := os.ReadFile(script)
		t.Errorf("%s\nscript:\n%s\noutput:\n%s", strings.Join(problems, "\n"), script, output)
	}
}

// stopDocServer stops a block's background command with SIGTERM, as a
// reader stops a broker with ^C, and checks it exits 0; one that does not
// exit within the broker's shutdown timeout is killed.
func stopDocServer(state string, pid int) error {
	exitFile := filepath.Join(state, fmt.Sprintf("exit-%d", pid))
	if _, err := os.Stat(exitFile); err != nil && syscall.Kill(pid, syscall.SIGTERM) == syscall.ESRCH {
		return nil // gone, and not one of ours
	}
	deadline := time.Now().Add(shutdownTimeout + 5*time.Second)
	for {
		if code, err := os.ReadFile(exitFile); err == nil {
			if string(code) != "0" {
				return fmt.Errorf("background command (pid %d) exited %s", pid, code)
			}
			return nil
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			if _, err := os.Stat(exitFile); err == nil {
				continue // it exited just now: read its code
			}
			return nil // not one of ours
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			return fmt.Errorf("background command (pid %d) still running %v after SIGTERM: killed", pid, shutdownTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDocScript checks the harness's reading of blocks: directives, a
// server in the foreground put in the background, & recorded but not &&.
func TestDocScript(t *testing.T) {
	doc := "text\n<!-- setup: broker & -->\n<!-- setup: echo two -->\n```sh\nbroker admin cluster list\n```\n" +
		"<!-- norun: needs docker -->\n```sh\ndocker ps\n```\n<!-- norun: -->\n```bash\nx\n```\n```go\nbroker\n```\n"
	blocks := docBlocks(doc)
	if len(blocks) != 3 || blocks[0].line != 4 || blocks[0].setup != "broker &\necho two\n" || blocks[0].marked ||
		blocks[1].norun != "needs docker" || !blocks[2].marked || blocks[2].norun != "" {
		t.Fatalf("blocks %+v", blocks)
	}
	got := docScript("", "go run ./cmd/broker --data-dir d   # the broker\n"+
		"broker namesrv \\\n  --listen 127.0.0.1:9876\n"+
		"broker admin cluster list && echo ok\n"+
		"for i in 0 1; do\n  broker --node-id n$i &  # a member\ndone\n"+
		"broker config defaults > b.yaml\n")
	for _, want := range []string{
		"go run ./cmd/broker --data-dir d & __doc_bg $!   # the broker\n",
		"broker namesrv \\\n  --listen 127.0.0.1:9876 & __doc_bg $!\n",
		"broker admin cluster list && echo ok\n",
		"  broker --node-id n$i & __doc_bg $!  # a member\n",
		"broker config defaults > b.yaml\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("script lacks %q:\n%s", want, got)
		}
	}
}

// TestMapAddrs checks which ports the harness maps, and that a document
// maps each port to one free port.
func TestMapAddrs(t *testing.T) {
	t.Setenv(envDocPorts, filepath.Join(t.TempDir(), "ports"))
	a := mapAddrs("127.0.0.1:10911")
	if a == "127.0.0.1:10911" || !strings.HasPrefix(a, "127.0.0.1:") {
		t.Fatalf("mapped to %q", a)
	}
	port := strings.TrimPrefix(a, "127.0.0.1:")
	for in, want := range map[string]string{
		":10911":                        ":" + port,
		"localhost:10911":               "localhost:" + port,
		"http://127.0.0.1:10911/readyz": "http://127.0.0.1:" + port + "/readyz",
		"n0=127.0.0.1:10911,n1=h:1":     "n0=127.0.0.1:" + port + ",n1=h:1",
		"127.0.0.1:0":                   "127.0.0.1:0",
		"--begin 24h":                   "--begin 24h",
		"order-42":                      "order-42",
	} {
		if got := mapAddrs(in); got != want {
			t.Errorf("mapAddrs(%q) = %q, want %q", in, got, want)
		}
	}
	if b := mapAddrs("127.0.0.1:9876"); b == a || b == "127.0.0.1:9876" {
		t.Errorf("9876 mapped to %q, 10911 to %q", b, a)
	}
}
