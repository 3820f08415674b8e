package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// TestMain lets the test binary act as the broker command in a child
// process, so the kill test can SIGKILL a real broker.
func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv("RMQ_BROKER_CHILD_ARGS"); ok {
		os.Exit(run(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
	}
	// A child started with its arguments on the command line, as the
	// bench probes start a broker executable.
	if os.Getenv("RMQ_BROKER_CHILD") == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	// A documented shell block's broker or go command.
	if code, ok := docMain(); ok {
		os.Exit(code)
	}
	code := m.Run()
	removeBuiltModules()
	os.Exit(code)
}

func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestUsageAndBadFlags(t *testing.T) {
	if code, _, _ := runCmd("-h"); code != 0 {
		t.Fatalf("-h exit %d", code)
	}
	if code, _, errs := runCmd("--no-such-flag"); code != 2 || !strings.Contains(errs, "no-such-flag") {
		t.Fatalf("unknown flag: exit %d, %q", code, errs)
	}
	if code, _, errs := runCmd("--flush", "sometimes", "--data-dir", t.TempDir()); code != 2 || !strings.Contains(errs, "sometimes") {
		t.Fatalf("bad flush mode: exit %d, %q", code, errs)
	}
	if code, _, errs := runCmd("--log-level", "loud"); code != 2 || !strings.Contains(errs, "loud") {
		t.Fatalf("bad log level: exit %d, %q", code, errs)
	}
	if code, _, errs := runCmd("frobnicate"); code != 2 || !strings.Contains(errs, "frobnicate") {
		t.Fatalf("unknown command: exit %d, %q", code, errs)
	}
	if code, _, _ := runCmd("bench"); code != 2 {
		t.Fatalf("bench without a mode: exit %d", code)
	}
	// The test binary is not the broker, so compare needs one named.
	if code, _, errs := runCmd("bench", "compare", "--quick"); code != 2 || !strings.Contains(errs, "--broker-bin") {
		t.Fatalf("bench compare from a binary that is not the broker: exit %d, %q", code, errs)
	}
	if code, _, errs := runCmd("bench", "compare", "--broker-bin", os.Args[0], "--pairings", "8", "--rounds", "-1"); code != 1 ||
		!strings.Contains(errs, "pairing 8") || !strings.Contains(errs, "Rounds -1") {
		t.Fatalf("bench compare with bad options: exit %d, %q", code, errs)
	}
	if code, _, errs := runCmd("bench", "memory", "--quick"); code != 2 || !strings.Contains(errs, "--broker-bin") {
		t.Fatalf("bench memory from a binary that is not the broker: exit %d, %q", code, errs)
	}
	if code, _, errs := runCmd("bench", "memory", "--broker-bin", os.Args[0], "--conns", "-1", "--polls", "-2"); code != 1 ||
		!strings.Contains(errs, "Conns -1") || !strings.Contains(errs, "Polls -2") {
		t.Fatalf("bench memory with bad options: exit %d, %q", code, errs)
	}
}

func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, fmt.Sprintf("c%d.yaml", time.Now().UnixNano()))
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Unknown keys are errors that name the key.
	code, _, errs := runCmd("--config", write("listen: 127.0.0.1:0\nlisten_typo: x\n"))
	if code != 2 || !strings.Contains(errs, "listen_typo") {
		t.Fatalf("unknown key: exit %d, %q", code, errs)
	}
	code, _, errs = runCmd("--config", write("store:\n  segmentSize: lots\n"))
	if code != 2 || !strings.Contains(errs, "lots") {
		t.Fatalf("bad size: exit %d, %q", code, errs)
	}
	// Values the components refuse stop the broker before it serves.
	code, _, errs = runCmd("--config", write("topics:\n  - name: bad topic\n"), "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0", "--namesrv-listen", "", "--http-listen", "127.0.0.1:0")
	if code != 1 || !strings.Contains(errs, "broker failed to start") || !strings.Contains(errs, "bad topic") {
		t.Fatalf("bad topic: exit %d, %q", code, errs)
	}
	code, _, errs = runCmd("--config", filepath.Join(dir, "missing.yaml"))
	if code != 2 || !strings.Contains(errs, "missing.yaml") {
		t.Fatalf("missing file: exit %d, %q", code, errs)
	}

	// A good file applies, and flags override it.
	path := write("listen: 1.2.3.4:5\nflush: async\ndataDir: /from/file\nstore:\n  segmentSize: 64MiB\n  retention: 24h\ntopics:\n  - name: Orders\n    queues: 8\n")
	cfg, _, code := brokerConfig([]string{"--config", path, "--data-dir", "/from/flag"}, io.Discard)
	if code != -1 {
		t.Fatalf("exit %d", code)
	}
	if cfg.Listen != "1.2.3.4:5" || cfg.DataDir != "/from/flag" || cfg.Store.Flush != store.FlushAsync || cfg.Store.SegmentSize != 64<<20 || cfg.Store.Retention != 24*time.Hour ||
		cfg.NamesrvListen != server.DefaultNamesrvListen {
		t.Fatalf("applied config %+v", cfg)
	}
	if tops := cfg.Broker.Topics; len(tops) != 1 || tops[0].Name != "Orders" || tops[0].Queues != 8 {
		t.Fatalf("topics %+v", tops)
	}
	if cfg, _, code := brokerConfig([]string{"--config", write("")}, io.Discard); code != -1 || cfg.NamesrvListen != server.DefaultNamesrvListen {
		t.Fatalf("empty file: exit %d, %+v", code, cfg)
	}
}

var startedLine = regexp.MustCompile(`msg="broker started" listen=(\S+) namesrv=(\S+)`)

// startChild runs the broker command in a child process and returns it
// with its broker and name-server addresses and its log, which grows
// while the child runs.
func startChild(t *testing.T, args ...string) (*exec.Cmd, string, string, *storetest.LogBuffer) {
	t.Helper()
	args = append([]string{"--http-listen", "127.0.0.1:0"}, args...) // never the default port
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "RMQ_BROKER_CHILD_ARGS="+strings.Join(args, "\x1f"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	logs := &storetest.LogBuffer{}
	found := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs.Write([]byte(sc.Text() + "\n"))
			if m := startedLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m
			}
		}
		io.Copy(logs, stderr) // a line too long for the scanner, and all after it
	}()
	m := brokertest.Wait(t, found, 30*time.Second, "the child broker to start")
	return cmd, m[1], m[2], logs
}

// TestKillDuringSendsLosesNothingAcknowledged sends from several producers
// to a broker in a child process, kills it with SIGKILL mid-stream, and
// checks that every acknowledged message is there after a restart.
func TestKillDuringSendsLosesNothingAcknowledged(t *testing.T) {
	dataDir := t.TempDir()
	cmd, brokerAddr, nsAddr, _ := startChild(t, "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--namesrv-listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--log-level", "info")
	_ = brokerAddr
	topic := "KillTest"
	p, err := producer.NewDefaultProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{nsAddr})),
		producer.WithInstanceName(brokertest.Name("kill")),
		producer.WithRetry(0),
		producer.WithSendMsgTimeout(3*time.Second),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()

	var (
		mu     sync.Mutex
		acked  = map[string]bool{}
		killed atomic.Bool
		wg     sync.WaitGroup
	)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !killed.Load(); i++ {
				body := fmt.Sprintf("w%d-%d", w, i)
				res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)))
				if err == nil && res.Status == primitive.SendOK && !killed.Load() {
					mu.Lock()
					acked[body] = true
					mu.Unlock()
				}
				if err != nil && killed.Load() {
					return
				}
			}
		}()
	}
	brokertest.Eventually(t, 60*time.Second, "2000 acknowledged sends", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 2000
	})
	// Snapshot what was acknowledged, then kill without warning.
	mu.Lock()
	before := make(map[string]bool, len(acked))
	for k := range acked {
		before[k] = true
	}
	mu.Unlock()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed.Store(true)
	cmd.Wait()
	wg.Wait()

	env := brokertest.StartConfig(t, server.Config{DataDir: dataDir, Listen: "127.0.0.1:0", Logger: brokertest.Logger()})
	found := map[string]bool{}
	tc := env.Broker.Topics()[topic]
	for q := int32(0); q < int32(tc.ReadQueueNums); q++ {
		it := env.Store.NewQueueIter(topic, q, store.IterOptions{StopOnCorruption: true})
		for ok := it.SeekGE(0); ok; ok = it.Next() {
			found[string(it.Record().Body())] = true
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
	}
	lost := 0
	for body := range before {
		if !found[body] {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged messages lost after SIGKILL", lost, len(before))
	}
	t.Logf("%d acknowledged before the kill, %d stored after restart", len(before), len(found))
}
