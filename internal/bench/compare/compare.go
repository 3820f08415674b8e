package compare

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/internal/bench"
	"github.com/rmq-go/rmq/internal/bench/child"
)

// kind is what a pairing measures.
type kind int

const (
	produceKind kind = iota // produce for Duration, as fast as acknowledgements come
	consumeKind             // write ConsumeCount messages, then time reading them back
	latencyKind             // produce for Duration at half of pairing 1's rate
)

// pairing is a load on this broker and its counterpart on JetStream: one
// line of the table.
type pairing struct {
	id   int
	name string
	kind kind

	// This broker: its --flush, and the bench's connections, requests in
	// flight per connection and messages per request.
	flush                  string
	conns, inflight, batch int

	// JetStream: `nats bench js pub <jsMode>` with jsClients clients and,
	// for async and fast, jsBatch; syncAlways sets sync_interval: always.
	jsMode     string
	jsClients  int
	jsBatch    int
	syncAlways bool
	// prior is a guess of JetStream's msgs/s on a small machine. nats
	// bench sends a count of messages, not for a time, so the first run of
	// a pairing sends prior×Duration; later runs use the rate the last
	// one measured.
	prior float64

	// latency says whether both sides time each message from send to
	// acknowledgement, so their p50 and p99 compare.
	latency bool
}

// Pairing numbers with a role.
const (
	rateSource     = 1 // its medians set pairing 7's rates
	latencyPairing = 7
)

// pairings are the package documentation's table.
var pairings = []pairing{
	{id: 1, name: "request/response, 64 clients", kind: produceKind,
		flush: "sync", conns: 64, inflight: 1, batch: 1,
		jsMode: "sync", jsClients: 64, prior: 25_000, latency: true},
	{id: 2, name: "pipelined, fsync before ack vs lazy", kind: produceKind,
		flush: "sync", conns: 4, inflight: 128, batch: 1,
		jsMode: "async", jsClients: 4, jsBatch: 500, prior: 100_000},
	// The same load shape as 2, so that 2 and 3 differ only in our fsync
	// mode, and both match JetStream's four pipelining clients.
	{id: 3, name: "pipelined, both lazy fsync", kind: produceKind,
		flush: "async", conns: 4, inflight: 128, batch: 1,
		jsMode: "async", jsClients: 4, jsBatch: 500, prior: 100_000},
	{id: 4, name: "fsync before every ack, 64 clients", kind: produceKind,
		flush: "sync", conns: 64, inflight: 1, batch: 1,
		jsMode: "sync", jsClients: 64, syncAlways: true, prior: 2_500, latency: true},
	// JetStream has two batch publishers. An atomic batch is staged and
	// committed all or nothing, a transaction with a cost to match (about
	// 5k msgs/s here however many clients). A fast batch is its
	// throughput feature: messages stream on with one acknowledgement per
	// flow window, which is what a RocketMQ batch is, one request and one
	// response for 32 messages with no promise beyond that. So fast, with
	// a window of 32; it may have one acknowledgement outstanding, a
	// second window in flight that our 1-in-flight connections do not get.
	{id: 5, name: "batched produce, 32 per ack, 64 clients", kind: produceKind,
		flush: "sync", conns: 64, inflight: 1, batch: 32,
		jsMode: "fast", jsClients: 64, jsBatch: 32, prior: 70_000},
	// Catch-up reading without acknowledgements on either side: the
	// bench's pulls over the topic's 8 queues, and JetStream's ordered
	// consumer, its way of reading a stream through.
	{id: 6, name: "catch-up consume", kind: consumeKind,
		flush: "sync", conns: 4, inflight: 4, batch: 32,
		jsMode: "async", jsClients: 4, jsBatch: 500},
	{id: latencyPairing, name: "latency at half of 1's rate", kind: latencyKind,
		flush: "sync", conns: 64, inflight: 1, batch: 1,
		jsMode: "sync", jsClients: 64, latency: true},
}

func pairingByID(id int) *pairing {
	for i := range pairings {
		if pairings[i].id == id {
			return &pairings[i]
		}
	}
	return nil
}

// system is one of the two things compared.
type system int

const (
	rmq system = iota
	jetStream
)

func (s system) String() string { return [...]string{"rmq-go", "JetStream"}[s] }

// Measure is one measured run of one system.
type Measure struct {
	MsgsPerSec float64
	Messages   int64         // messages the measured part moved
	Elapsed    time.Duration // how long it took
	CPUPerMsg  time.Duration // server CPU per message; 0 when /proc cannot tell
	// P50 and P99 are per message, send to acknowledgement; 0 when the
	// run does not time single messages.
	P50, P99 time.Duration
	// ClientCPUPerMsg is the load generator's CPU per message, where it
	// runs in this process (RunProtocols); 0 elsewhere.
	ClientCPUPerMsg time.Duration
	// Errors counts failed requests (this broker's runs); a JetStream run
	// with a failure ends the comparison instead.
	Errors int64
	// Warnings are what nats bench said about its run.
	Warnings []string
}

// Row is one pairing's runs, in round order.
type Row struct {
	Pairing         int
	Name            string
	RMQ, JetStream  []Measure
	RMQCmd, JSCmd   string // the load on each side, as commands
	RMQRate, JSRate int    // pairing 7's target msgs/s; 0 elsewhere
	latency         bool
}

// Report is the outcome of Run.
type Report struct {
	Rows              []Row
	Rounds            int
	Duration          time.Duration
	Size              int
	ConsumeCount      int64
	NatsServerVersion string
	NatsCLIVersion    string
}

// Run installs nats-server and the nats CLI when the cache lacks them,
// then runs each selected pairing Rounds times, each round one run of
// each system on fresh servers, alternating which goes first. It writes a
// line per run to log (which may be nil) and returns the runs for
// Report.String to tabulate. An error ends the comparison: a server that
// did not start, a nats bench that failed, ctx's end.
func Run(ctx context.Context, opts Options, log io.Writer) (Report, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return Report{}, err
	}
	if err := o.validate(); err != nil {
		return Report{}, err
	}
	if log == nil {
		log = io.Discard
	}
	c := &comparer{o: o, jsRate: make(map[int]float64)}
	c.natsServer, err = tool{module: NatsServerModule, pkg: natsServerPkg, version: o.NatsServerVersion, bin: "nats-server"}.ensure(ctx, o.Go, o.CacheDir, log)
	if err != nil {
		return Report{}, err
	}
	c.nats, err = tool{module: NatsCLIModule, pkg: natsCLIPkg, version: o.NatsCLIVersion, bin: "nats"}.ensure(ctx, o.Go, o.CacheDir, log)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Rounds: o.Rounds, Duration: o.Duration, Size: o.Size, ConsumeCount: o.ConsumeCount,
		NatsServerVersion: o.NatsServerVersion, NatsCLIVersion: o.NatsCLIVersion}
	for _, id := range o.Pairings {
		p := pairingByID(id)
		row := Row{Pairing: id, Name: p.name, latency: p.latency}
		if p.kind == latencyKind {
			row.RMQRate, row.JSRate = c.halfRate[rmq], c.halfRate[jetStream]
		}
		row.RMQCmd, row.JSCmd = c.rmqCmd(p, row.RMQRate), c.jsCmd(p, row.JSRate)
		for round := range o.Rounds {
			order := []system{rmq, jetStream}
			if round%2 == 1 {
				order = []system{jetStream, rmq}
			}
			for _, sys := range order {
				var m Measure
				if sys == rmq {
					m, err = c.runRMQ(ctx, p, row.RMQRate)
				} else {
					m, err = c.runJS(ctx, p, row.JSRate)
				}
				if err != nil {
					return rep, fmt.Errorf("pairing %d (%s), round %d, %s: %w", id, p.name, round+1, sys, err)
				}
				fmt.Fprintf(log, "%d %-40s round %d/%d  %-9s %s\n", id, p.name, round+1, o.Rounds, sys, m)
				if sys == rmq {
					row.RMQ = append(row.RMQ, m)
				} else {
					row.JetStream = append(row.JetStream, m)
				}
			}
		}
		if id == rateSource {
			c.halfRate[rmq] = max(1, int(median(rates(row.RMQ))/2))
			c.halfRate[jetStream] = max(1, int(median(rates(row.JetStream))/2))
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// String is the one-line form of m that Run logs.
func (m Measure) String() string {
	s := fmt.Sprintf("%9.0f msgs/s in %5.1fs  %6.1f µs CPU/msg", m.MsgsPerSec, m.Elapsed.Seconds(), micros(m.CPUPerMsg))
	if m.P99 > 0 {
		s += fmt.Sprintf("  p50 %v p99 %v", m.P50.Round(time.Microsecond), m.P99.Round(time.Microsecond))
	}
	if m.Errors > 0 {
		s += fmt.Sprintf("  %d errors", m.Errors)
	}
	for _, w := range m.Warnings {
		s += "  " + w
	}
	return s
}

// comparer is the state of one Run.
type comparer struct {
	o                Options
	natsServer, nats string // binaries
	// jsRate is the last JetStream msgs/s measured per pairing, which
	// sizes the next run.
	jsRate map[int]float64
	// halfRate is half of pairing 1's median per system, the rate of
	// pairing 7.
	halfRate [2]int
}

// subject is the subject of JetStream's stream, benchstream.
const subject = "bench.compare"

// runRMQ measures this broker once on a fresh broker process.
func (c *comparer) runRMQ(ctx context.Context, p *pairing, rate int) (Measure, error) {
	dir, err := os.MkdirTemp(c.o.TempDir, "rmq-compare-*")
	if err != nil {
		return Measure{}, err
	}
	srv, err := startServer(ctx, "broker", dir, []string{c.o.Broker,
		"--data-dir", dir, "--listen", "127.0.0.1:0", "--namesrv-listen", "", "--http-listen", "", "--flush", p.flush}, child.BrokerReady)
	if err != nil {
		return Measure{}, err
	}
	defer srv.stop()
	opts := bench.Options{Broker: srv.Addr(), Size: c.o.Size, Conns: p.conns, InFlight: p.inflight, Batch: p.batch}
	pid := srv.PID()
	if _, err := bench.ProcessCPU(pid); err != nil {
		pid = 0 // no /proc: no CPU figure
	}
	var sum bench.Summary
	switch p.kind {
	case produceKind, latencyKind:
		opts.Duration, opts.Rate, opts.BrokerPID = c.o.Duration, rate, pid
		sum, err = bench.Produce(ctx, opts, nil)
	case consumeKind:
		opts.Count = c.o.ConsumeCount
		var fill bench.Summary
		if fill, err = bench.Produce(ctx, opts, nil); err == nil && fill.Errors > 0 {
			err = fmt.Errorf("%w: %d of the requests writing the backlog failed: %v", ErrRun, fill.Errors, fill.ErrorSamples)
		}
		if err == nil {
			sum, err = bench.Consume(ctx, bench.Options{Broker: srv.Addr(), Count: c.o.ConsumeCount, BrokerPID: pid}, nil)
		}
	}
	if err != nil {
		return Measure{}, err
	}
	if sum.Messages == 0 {
		return Measure{}, fmt.Errorf("%w: no message moved; %d errors: %v", ErrRun, sum.Errors, sum.ErrorSamples)
	}
	m := Measure{MsgsPerSec: sum.MsgsPerSec, Messages: sum.Messages, Elapsed: sum.Elapsed, CPUPerMsg: sum.BrokerCPUPerMsg, Errors: sum.Errors}
	if p.latency {
		m.P50, m.P99 = sum.P50, sum.P99
	}
	return m, nil
}

// runJS measures JetStream once on a fresh nats-server process.
func (c *comparer) runJS(ctx context.Context, p *pairing, rate int) (Measure, error) {
	dir, err := os.MkdirTemp(c.o.TempDir, "rmq-compare-*")
	if err != nil {
		return Measure{}, err
	}
	conf := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(conf, []byte(natsConfig(dir, p.syncAlways)), 0o600); err != nil {
		os.RemoveAll(dir)
		return Measure{}, err
	}
	srv, err := startServer(ctx, "nats-server", dir, []string{c.natsServer, "-c", conf}, natsReady)
	if err != nil {
		return Measure{}, err
	}
	defer srv.stop()
	url := "nats://" + srv.Addr()
	// Runs are sized to take about Duration; one that takes many times
	// that has gone wrong.
	timeout := 2*time.Minute + 20*c.o.Duration

	var n int64
	var args []string
	switch p.kind {
	case produceKind:
		est := c.jsRate[p.id]
		if est == 0 {
			est = p.prior
		}
		n = max(int64(est*c.o.Duration.Seconds()), 100*int64(p.jsClients))
		args = c.jsPubArgs(p, n)
	case latencyKind:
		// nats bench derives the count as it does here.
		n = int64(math.Round(float64(rate) * c.o.Duration.Seconds()))
		args = append(c.jsPubArgs(p, 0), "--throughput", strconv.Itoa(rate), "--duration", c.o.Duration.String())
	case consumeKind:
		n = c.o.ConsumeCount
		if _, err := runNatsBench(ctx, c.nats, url, timeout, c.jsPubArgs(p, n)...); err != nil {
			return Measure{}, fmt.Errorf("writing the backlog: %w", err)
		}
		args = []string{"ordered", "--msgs", strconv.FormatInt(n, 10), "--size", strconv.Itoa(c.o.Size)}
	}

	cpu0, cpuErr := bench.ProcessCPU(srv.PID())
	r, err := runNatsBench(ctx, c.nats, url, timeout, args...)
	if err != nil {
		return Measure{}, err
	}
	cpu1, cpuErr1 := bench.ProcessCPU(srv.PID())
	m := Measure{MsgsPerSec: r.msgsPerSec, Messages: n, Warnings: r.warnings}
	if r.msgsPerSec > 0 {
		m.Elapsed = time.Duration(float64(n) / r.msgsPerSec * float64(time.Second))
	}
	if cpuErr == nil && cpuErr1 == nil && n > 0 {
		m.CPUPerMsg = (cpu1 - cpu0) / time.Duration(n)
	}
	if p.latency && p.jsMode == "sync" {
		m.P50, m.P99 = r.p50, r.p99
	}
	if p.kind == produceKind {
		c.jsRate[p.id] = r.msgsPerSec
	}
	return m, nil
}

// jsPubArgs are the arguments of `nats bench js` that publish n messages
// (none when n is 0) for p.
func (c *comparer) jsPubArgs(p *pairing, n int64) []string {
	args := []string{"pub", p.jsMode, subject, "--create", "--clients", strconv.Itoa(p.jsClients), "--size", strconv.Itoa(c.o.Size)}
	if p.jsBatch > 0 {
		args = append(args, "--batch", strconv.Itoa(p.jsBatch))
	}
	if n > 0 {
		// The stream's limit, 1 GB unless told, refuses what is over it.
		limit := max(1<<30, 2*n*int64(c.o.Size+256))
		args = append(args, "--msgs", strconv.FormatInt(n, 10), "--maxbytes", strconv.FormatInt(limit, 10))
	}
	return args
}

// rmqCmd describes p's load on this broker as the commands that make it.
func (c *comparer) rmqCmd(p *pairing, rate int) string {
	b := fmt.Sprintf("broker --flush %s; broker bench ", p.flush)
	if p.kind == consumeKind {
		return b + fmt.Sprintf("produce --count %d --conns %d --inflight %d --batch %d, then broker bench consume --count %d",
			c.o.ConsumeCount, p.conns, p.inflight, p.batch, c.o.ConsumeCount)
	}
	b += fmt.Sprintf("produce --conns %d --inflight %d", p.conns, p.inflight)
	if p.batch > 1 {
		b += fmt.Sprintf(" --batch %d", p.batch)
	}
	if rate > 0 {
		b += fmt.Sprintf(" --rate %d", rate)
	}
	return b
}

// jsCmd describes p's load on JetStream as the commands that make it.
func (c *comparer) jsCmd(p *pairing, rate int) string {
	fsync := "lazy fsync"
	if p.syncAlways {
		fsync = "sync_interval: always"
	}
	b := fmt.Sprintf("file store, %s; nats bench js pub %s --clients %d", fsync, p.jsMode, p.jsClients)
	if p.jsBatch > 0 {
		b += fmt.Sprintf(" --batch %d", p.jsBatch)
	}
	switch {
	case p.kind == consumeKind:
		b += fmt.Sprintf(" --msgs %d, then nats bench js ordered --msgs %d", c.o.ConsumeCount, c.o.ConsumeCount)
	case rate > 0:
		b += fmt.Sprintf(" --throughput %d", rate)
	}
	return b
}

// rates returns the msgs/s of each run.
func rates(ms []Measure) []float64 {
	v := make([]float64, len(ms))
	for i, m := range ms {
		v[i] = m.MsgsPerSec
	}
	return v
}

// micros is d in microseconds.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// String formats the report as a Markdown table followed by notes on how
// it was measured and what each pairing ran.
func (r Report) String() string {
	header := []string{"pairing", "rmq-go msgs/s", "JetStream msgs/s", "ratio",
		"rmq-go CPU µs/msg", "JetStream CPU µs/msg", "rmq-go p50 / p99", "JetStream p50 / p99"}
	rows := [][]string{header}
	for _, row := range r.Rows {
		ours, theirs := rates(row.RMQ), rates(row.JetStream)
		cells := []string{
			fmt.Sprintf("%d. %s", row.Pairing, row.Name),
			spread(ours, fmtRate),
			spread(theirs, fmtRate),
			fmtRatio(median(ours), median(theirs)),
			spread(cpus(row.RMQ), fmtMicros),
			spread(cpus(row.JetStream), fmtMicros),
			latencyCell(row.RMQ, row.latency),
			latencyCell(row.JetStream, row.latency),
		}
		rows = append(rows, cells)
	}
	var b strings.Builder
	bench.WriteTable(&b, rows)
	catchUp := ""
	for _, row := range r.Rows {
		if row.Pairing == 6 {
			catchUp = fmt.Sprintf(", %d messages for catch-up", r.ConsumeCount)
		}
	}
	b.WriteString("\n")
	b.WriteString(bench.Wrap(fmt.Sprintf("Median (min–max) of %d round%s, each run of each system on a fresh server with an empty data directory; "+
		"%d-byte messages, produce runs of %v%s. CPU: the server process's user+system time over the measured run, "+
		"from /proc, per message moved. p50 / p99: per message, send to acknowledgement. nats-server %s, nats CLI %s.",
		r.Rounds, plural(r.Rounds), r.Size, r.Duration, catchUp, r.NatsServerVersion, r.NatsCLIVersion), 80, ""))
	for _, row := range r.Rows {
		b.WriteString("\n")
		b.WriteString(bench.Wrap(fmt.Sprintf("%d. rmq-go: %s.", row.Pairing, row.RMQCmd), 80, "   "))
		b.WriteString(bench.Wrap(fmt.Sprintf("   JetStream: %s.", row.JSCmd), 80, "   "))
		var errs int64
		for _, m := range row.RMQ {
			errs += m.Errors
		}
		if errs > 0 {
			fmt.Fprintf(&b, "   rmq-go: %d failed requests.\n", errs)
		}
		for _, m := range row.JetStream {
			for _, w := range m.Warnings {
				fmt.Fprintf(&b, "   JetStream: %s\n", w)
			}
		}
	}
	return b.String()
}

// cpus returns each run's CPU per message in microseconds, or nil when
// any run lacks it.
func cpus(ms []Measure) []float64 {
	v := make([]float64, len(ms))
	for i, m := range ms {
		if m.CPUPerMsg <= 0 {
			return nil
		}
		v[i] = micros(m.CPUPerMsg)
	}
	return v
}

// latencyCell is the median p50 and p99 of the runs, "–" for a pairing
// whose two sides do not time the same thing, and "not reported" where
// a run has no latencies.
func latencyCell(ms []Measure, latency bool) string {
	if !latency {
		return "–"
	}
	p50, p99 := make([]float64, len(ms)), make([]float64, len(ms))
	for i, m := range ms {
		if m.P99 <= 0 {
			return "not reported"
		}
		p50[i], p99[i] = float64(m.P50), float64(m.P99)
	}
	return fmtMillis(median(p50)) + " / " + fmtMillis(median(p99)) + " ms"
}

// spread is the median of v and, with more than one value, the range:
// "17.9k (17.2k–18.4k)". No values is "n/a".
func spread(v []float64, format func(float64) string) string {
	if len(v) == 0 {
		return "n/a"
	}
	s := format(median(v))
	if len(v) > 1 {
		lo, hi := v[0], v[0]
		for _, x := range v {
			lo, hi = min(lo, x), max(hi, x)
		}
		s += " (" + format(lo) + "–" + format(hi) + ")"
	}
	return s
}

// median is the middle of v, or the mean of the two middle values; 0 for
// none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// fmtRate writes a rate with three significant digits and a k or M
// suffix: 950, 1.23k, 17.9k, 198k, 1.05M.
func fmtRate(v float64) string {
	unit, suffix := 1.0, ""
	switch {
	case v >= 999_500:
		unit, suffix = 1e6, "M"
	case v >= 999.5:
		unit, suffix = 1e3, "k"
	}
	return threeDigits(v/unit) + suffix
}

func threeDigits(x float64) string {
	switch {
	case x < 9.995:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case x < 99.95:
		return strconv.FormatFloat(x, 'f', 1, 64)
	default:
		return strconv.FormatFloat(x, 'f', 0, 64)
	}
}

func fmtMicros(us float64) string { return threeDigits(us) }

// fmtMillis writes nanoseconds as milliseconds, three significant digits.
func fmtMillis(ns float64) string { return threeDigits(ns / 1e6) }

func fmtRatio(ours, theirs float64) string {
	if theirs == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(ours/theirs, 'f', 2, 64) + "×"
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
