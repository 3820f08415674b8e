package compare

import (
	"context"
	"debug/buildinfo"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0.00", 950: "950", 999.7: "1.00k", 1234: "1.23k", 17912: "17.9k",
		99_960: "100k", 198_000: "198k", 999_600: "1.00M", 1_234_567: "1.23M",
	} {
		if got := fmtRate(v); got != want {
			t.Errorf("fmtRate(%v) = %q, want %q", v, got, want)
		}
	}
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median of 3, 1, 2 = %v", got)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median of 4, 1, 3, 2 = %v", got)
	}
}

func TestReport(t *testing.T) {
	run := func(rate, cpuUS float64, p50, p99 time.Duration) Measure {
		return Measure{MsgsPerSec: rate, CPUPerMsg: time.Duration(cpuUS * float64(time.Microsecond)), P50: p50, P99: p99}
	}
	ms := time.Millisecond
	rep := Report{Rounds: 3, Duration: 10 * time.Second, Size: 1024, ConsumeCount: 500_000,
		NatsServerVersion: "v2.15.2", NatsCLIVersion: "v0.5.0",
		Rows: []Row{
			{Pairing: 1, Name: "request/response, 64 clients", latency: true,
				RMQ:       []Measure{run(17_000, 36, ms, 4*ms), run(19_500, 35, 2*ms, 5*ms), run(18_000, 37, 3*ms, 6*ms)},
				JetStream: []Measure{run(26_000, 12, ms, 3*ms), run(28_000, 12.5, ms, 3*ms), run(27_200, 11, 2*ms, 3*ms)},
				RMQCmd:    "broker --flush sync; broker bench produce --conns 64 --inflight 1",
				JSCmd:     "file store, lazy fsync; nats bench js pub sync --clients 64"},
			{Pairing: 2, Name: "pipelined",
				RMQ:       []Measure{run(43_000, 0, ms, ms), run(44_000, 21, ms, ms), run(42_000, 22, ms, ms)},
				JetStream: []Measure{run(104_900, 7, 0, 0), run(100_000, 7, 0, 0), run(110_000, 7, 0, 0)},
				RMQCmd:    "broker --flush sync; broker bench produce --conns 4 --inflight 128",
				JSCmd:     "file store, lazy fsync; nats bench js pub async --clients 4 --batch 500"},
			{Pairing: 7, Name: "latency at half of 1's rate", latency: true,
				RMQ:       []Measure{run(9_000, 40, ms, 2*ms), run(9_000, 40, ms, 2*ms), run(9_000, 40, ms, 2*ms)},
				JetStream: []Measure{run(13_600, 20, 0, 0), run(13_600, 20, 0, 0), run(13_600, 20, 0, 0)},
				RMQCmd:    "r", JSCmd: "j"},
		}}
	got := rep.String()
	for _, want := range []string{
		"| pairing                         | rmq-go msgs/s       | JetStream msgs/s    | ratio | rmq-go CPU µs/msg | JetStream CPU µs/msg | rmq-go p50 / p99 | JetStream p50 / p99 |\n",
		"| 1. request/response, 64 clients | 18.0k (17.0k–19.5k) | 27.2k (26.0k–28.0k) | 0.66× | 36.0 (35.0–37.0)  | 12.0 (11.0–12.5)     | 2.00 / 5.00 ms   | 1.00 / 3.00 ms      |\n",
		// One run without a CPU figure makes the cell n/a; the sides do
		// not time the same thing, so no latencies.
		"| 2. pipelined                    | 43.0k (42.0k–44.0k) | 105k (100k–110k)    | 0.41× | n/a               | 7.00 (7.00–7.00)     | –                | –                   |\n",
		"| 7. latency at half of 1's rate  | 9.00k (9.00k–9.00k) | 13.6k (13.6k–13.6k) | 0.66× | 40.0 (40.0–40.0)  | 20.0 (20.0–20.0)     | 1.00 / 2.00 ms   | not reported        |\n",
		"Median (min–max) of 3 rounds,",
		"nats-server v2.15.2, nats CLI\nv0.5.0.\n",
		"\n1. rmq-go: broker --flush sync; broker bench produce --conns 64 --inflight 1.\n   JetStream: file store, lazy fsync; nats bench js pub sync --clients 64.\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks\n%s\nin\n%s", want, got)
		}
	}
	if strings.Contains(got, "catch-up") {
		t.Errorf("report mentions catch-up without pairing 6:\n%s", got)
	}
	for _, line := range strings.Split(got, "\n") {
		if !strings.HasPrefix(line, "|") && len([]rune(line)) > 80 {
			t.Errorf("note line over 80 columns: %q", line)
		}
	}
}

func TestOptions(t *testing.T) {
	o, err := Options{Quick: true, Duration: 5 * time.Second, Pairings: []int{7, 3, 3}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Rounds != QuickRounds || o.Duration != 5*time.Second || o.ConsumeCount != QuickConsumeCount || o.Size != DefaultSize {
		t.Errorf("quick defaults: %+v", o)
	}
	if !slices.Equal(o.Pairings, []int{1, 3, 7}) {
		t.Errorf("pairings %v, want 1 (brought by 7), 3 and 7", o.Pairings)
	}
	o, _ = Options{}.withDefaults()
	if o.Rounds != DefaultRounds || o.Duration != DefaultDuration || len(o.Pairings) != len(pairings) ||
		o.NatsServerVersion != DefaultNatsServerVersion || o.NatsCLIVersion != DefaultNatsCLIVersion {
		t.Errorf("defaults: %+v", o)
	}

	bad := Options{Rounds: -1, Duration: 500 * time.Millisecond, Size: 1 << 20, Pairings: []int{0, 8}}
	_, err = Run(context.Background(), bad, nil)
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Run with bad options: %v", err)
	}
	for _, want := range []string{"Broker", "Rounds -1", "Duration 500ms", "Size 1048576", "pairing 0", "pairing 8"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
}

// TestNatsServerVersion keeps the version compare installs equal to the
// one go.mod requires.
func TestNatsServerVersion(t *testing.T) {
	mod, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(NatsServerModule) + ` (\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatalf("go.mod does not require %s", NatsServerModule)
	}
	if string(m[1]) != DefaultNatsServerVersion {
		t.Errorf("go.mod requires %s %s; DefaultNatsServerVersion is %s", NatsServerModule, m[1], DefaultNatsServerVersion)
	}
}

func TestToolCache(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	// The test binary stands for a tool of its own module and version.
	self := tool{module: info.Main.Path, pkg: info.Path, version: info.Main.Version, bin: "self"}
	cache := t.TempDir()
	noGo := filepath.Join(cache, "no-such-go")
	if _, err := self.ensure(context.Background(), noGo, cache, io.Discard); !errors.Is(err, ErrInstall) {
		t.Fatalf("ensure with nothing cached and no go: %v, want ErrInstall", err)
	}
	path := self.path(cache)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o700); err != nil {
		t.Fatal(err)
	}
	got, err := self.ensure(context.Background(), noGo, cache, io.Discard)
	if err != nil || got != path {
		t.Fatalf("ensure with the binary cached = %q, %v; want %q without go", got, err, path)
	}
	other := self
	other.version = "v0.0.1"
	if other.installed(path) {
		t.Errorf("a binary of version %q passes for %q", self.version, other.version)
	}
}
