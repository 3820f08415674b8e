package compare

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// natsResult is what one `nats bench` run reports.
type natsResult struct {
	msgsPerSec float64
	// p50 and p99 are the latencies per operation over all clients; zero
	// when the run reports none (consumers). An operation is one publish
	// for sync publishing and a whole batch for the others.
	p50, p99 time.Duration
	// warnings holds the WARNING lines nats bench logged: results it
	// calls not optimal (a disconnection, a timed-out fetch).
	warnings []string
}

// The lines of `nats bench` standard output that parseNatsBench reads,
// as v0.5.0 writes them. With one client there is one line:
//
//	NATS JetStream synchronous publisher stats: 4,355 msgs/sec ~ 4.3 MiB/sec ~ min: 63.73us ~ ... ~ P50: 112.94us ~ P90: 160.30us ~ P99: 1,982.62us ~ P99.9: 38,580.23us
//
// (a consumer's line stops after MiB/sec). With more, a line per client
// ("  [3] 3,480 msgs/sec ~ ...") and then the aggregate over all of them:
//
//	NATS JetStream synchronous publisher aggregated stats: 13,911 msgs/sec ~ 14 MiB/sec
//	message rates min 3,480 | avg 3,483 | max 3,487 | stddev 2 msgs
//	latencies per operation min 36.30us | avg 286.82us | ... | P50 245.54us | P90 441.28us | P99 1,059.27us | P99.9: 3,806.49us
//
// The --csv file is no help: it has the per-client rows only, and its
// MsgCount counts every message on the client's connection, publishes and
// their acknowledgements alike.
var (
	natsRate    = regexp.MustCompile(`stats: ([0-9,]+) msgs/sec`)
	natsLatency = regexp.MustCompile(`^\s*latencies per operation `)
	natsP50     = regexp.MustCompile(`P50:? ([0-9,]+(?:\.[0-9]+)?)us`)
	natsP99     = regexp.MustCompile(`P99:? ([0-9,]+(?:\.[0-9]+)?)us`)
)

// parseNatsBench reads the aggregate rate and latencies from the standard
// output of one `nats bench` run.
func parseNatsBench(out []byte) (natsResult, error) {
	var r natsResult
	var rateLine, latLine string
	for line := range strings.Lines(string(out)) {
		switch {
		case natsRate.MatchString(line):
			if rateLine != "" {
				return r, fmt.Errorf("%w: two stats lines", ErrNatsBench)
			}
			rateLine = line
			if natsP50.MatchString(line) { // the one-client form
				latLine = line
			}
		case natsLatency.MatchString(line):
			latLine = line
		}
	}
	if rateLine == "" {
		return r, fmt.Errorf("%w: no stats line in %q", ErrNatsBench, firstBytes(out, 300))
	}
	rate, err := strconv.ParseFloat(strings.ReplaceAll(natsRate.FindStringSubmatch(rateLine)[1], ",", ""), 64)
	if err != nil {
		return r, fmt.Errorf("%w: rate in %q: %v", ErrNatsBench, rateLine, err)
	}
	r.msgsPerSec = rate
	if latLine == "" {
		return r, nil
	}
	for _, q := range []struct {
		re  *regexp.Regexp
		dst *time.Duration
	}{{natsP50, &r.p50}, {natsP99, &r.p99}} {
		m := q.re.FindStringSubmatch(latLine)
		if m == nil {
			return r, fmt.Errorf("%w: no %s in %q", ErrNatsBench, q.re, latLine)
		}
		us, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
		if err != nil {
			return r, fmt.Errorf("%w: latency in %q: %v", ErrNatsBench, latLine, err)
		}
		*q.dst = time.Duration(us * float64(time.Microsecond))
	}
	return r, nil
}

// runNatsBench runs `nats bench js <args>` against the server at url and
// parses what it prints. The command fails after timeout.
func runNatsBench(ctx context.Context, natsBin, url string, timeout time.Duration, args ...string) (natsResult, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// --no-context keeps a context the user selected (credentials, TLS,
	// another server) out of the run.
	argv := append([]string{"--server", url, "--no-context", "bench", "js"}, args...)
	argv = append(argv, "--no-progress")
	cmd := exec.CommandContext(ctx, natsBin, argv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			err = fmt.Errorf("no result in %v", timeout)
		}
		return natsResult{}, fmt.Errorf("%w: nats %s: %v: %s", ErrNatsBench, strings.Join(argv, " "), err, lastLines(stderr.Bytes(), 5))
	}
	r, err := parseNatsBench(stdout.Bytes())
	if err != nil {
		return r, err
	}
	for line := range strings.Lines(stderr.String()) {
		if strings.Contains(line, "WARNING") {
			r.warnings = append(r.warnings, strings.TrimSpace(line))
		}
	}
	return r, nil
}

// firstBytes returns at most n bytes of b, as text.
func firstBytes(b []byte, n int) string {
	return string(b[:min(n, len(b))])
}

// lastLines returns the last n lines of b, joined by " | ".
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}
