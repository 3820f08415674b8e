package compare

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func us(v float64) time.Duration { return time.Duration(v * float64(time.Microsecond)) }

// TestParseNatsBench reads what nats bench v0.5.0 printed in real runs
// (testdata/natsbench/README lists the commands).
func TestParseNatsBench(t *testing.T) {
	for _, tc := range []struct {
		file     string
		rate     float64
		p50, p99 time.Duration
	}{
		{"sync1.txt", 4355, us(112.94), us(1982.62)},
		{"sync64.txt", 29997, us(1737.52), us(8796.14)},
		{"async4.txt", 31481, us(44867.06), us(296134.56)},
		{"fast64.txt", 76287, us(5296.86), us(17461.72)},
		{"ordered1.txt", 206517, 0, 0},
		{"syncrate.txt", 2981, us(320.88), us(3987.46)},
	} {
		t.Run(tc.file, func(t *testing.T) {
			out, err := os.ReadFile(filepath.Join("testdata", "natsbench", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			r, err := parseNatsBench(out)
			if err != nil {
				t.Fatal(err)
			}
			if r.msgsPerSec != tc.rate || r.p50 != tc.p50 || r.p99 != tc.p99 {
				t.Fatalf("got %.0f msgs/s, p50 %v, p99 %v; want %.0f, %v, %v", r.msgsPerSec, r.p50, r.p99, tc.rate, tc.p50, tc.p99)
			}
		})
	}
}

func TestParseNatsBenchRefuses(t *testing.T) {
	for name, out := range map[string]string{
		"empty":    "",
		"no stats": "No publisher or subscribers. Nothing to report.\n",
		"two stats lines": "NATS JetStream ordered ephemeral consumer stats: 1 msgs/sec ~ 1 KiB/sec\n" +
			"NATS JetStream ordered ephemeral consumer stats: 2 msgs/sec ~ 2 KiB/sec\n",
		"latency line without P99": " NATS JetStream synchronous publisher aggregated stats: 13,911 msgs/sec ~ 14 MiB/sec\n" +
			" latencies per operation min 36.30us | avg 286.82us | P50 245.54us\n",
	} {
		if r, err := parseNatsBench([]byte(out)); !errors.Is(err, ErrNatsBench) {
			t.Errorf("%s: got %+v, %v; want ErrNatsBench", name, r, err)
		}
	}
}
