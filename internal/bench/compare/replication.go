package compare

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/rmq-go/rmq/internal/bench"
	"github.com/rmq-go/rmq/internal/bench/child"
)

// ReplicationOptions configures RunReplication. The zero value of each
// field but Broker means its default.
type ReplicationOptions struct {
	// Broker is the broker executable; required.
	Broker string
	// Env is added to each broker's environment.
	Env []string
	// Rounds is the number of runs of each side per load; default 3.
	Rounds int
	// Duration is the length of each run; default 10 s.
	Duration time.Duration
	// Size is each message's body in bytes; default 1024.
	Size int
	// Loads lists the loads to run, by number (1 or 2, ReplicationLoads);
	// default both.
	Loads []int
	// Members is the size of the set; default 3.
	Members int
	// TempDir is where each broker gets its data directory; default
	// os.TempDir.
	TempDir string
}

// A replicationLoad is one line of RunReplication's table.
type replicationLoad struct {
	id              int
	name            string
	conns, inflight int
}

// ReplicationLoads are the loads RunReplication can run: request/response
// and pipelined sends, each synchronous, acknowledged after the fsync
// that covers them (a single broker's --flush sync, a set's raft commit).
var replicationLoads = []replicationLoad{
	{id: 1, name: "request/response, 64 × 1", conns: 64, inflight: 1},
	{id: 2, name: "pipelined, 4 × 128", conns: 4, inflight: 128},
}

// SetMeasure is one run of one side of RunReplication.
type SetMeasure struct {
	Measure
	// DiskPerByte is the bytes written to the data directories' device per
	// body byte acknowledged, over the run and the writeback it left (for a
	// set, divided by its members; bench.DeviceWriteBytes); 0 when /proc
	// cannot tell.
	DiskPerByte float64
	// AllCPUPerMsg is the CPU of every process of the side per message:
	// the broker's, or the members' together.
	AllCPUPerMsg time.Duration
}

// ReplicationRow is one load's runs, in round order.
type ReplicationRow struct {
	Load        int
	Name        string
	Single, Set []SetMeasure
}

// ReplicationReport is the outcome of RunReplication.
type ReplicationReport struct {
	Rows     []ReplicationRow
	Rounds   int
	Members  int
	Duration time.Duration
	Size     int
}

// RunReplication runs one broker and a replicated set of Members brokers
// side by side under each load, Rounds times, alternating which goes
// first, each run on fresh processes and empty directories. The load
// generator (internal/bench) sends to the single broker, or to the set's
// leader, from this process. It writes a line per run to log (which may
// be nil).
func RunReplication(ctx context.Context, o ReplicationOptions, log io.Writer) (ReplicationReport, error) {
	so := sideOptions{&o.Broker, &o.Rounds, &o.Duration, &o.Size, &o.Loads, &o.TempDir}
	so.defaults(len(replicationLoads))
	if o.Members == 0 {
		o.Members = 3
	}
	var extra []string
	if o.Members < 1 {
		extra = append(extra, fmt.Sprintf("members %d: want at least 1", o.Members))
	}
	if err := so.check(len(replicationLoads), extra...); err != nil {
		return ReplicationReport{}, err
	}
	if log == nil {
		log = io.Discard
	}
	rep := ReplicationReport{Rounds: o.Rounds, Members: o.Members, Duration: o.Duration, Size: o.Size}
	for _, id := range o.Loads {
		l := replicationLoads[id-1]
		row := ReplicationRow{Load: id, Name: l.name}
		for round := range o.Rounds {
			for i := range 2 {
				set := (i+round)%2 == 1
				m, err := runReplicationSide(ctx, o, l, set)
				side := "single"
				if set {
					side = fmt.Sprintf("set of %d", o.Members)
				}
				if err != nil {
					return rep, fmt.Errorf("load %d (%s), round %d, %s: %w", id, l.name, round+1, side, err)
				}
				fmt.Fprintf(log, "%d %-26s round %d/%d  %-9s %s  %.2f disk B/B  %.1f µs CPU/msg in all\n",
					id, l.name, round+1, o.Rounds, side, m.Measure, m.DiskPerByte, micros(m.AllCPUPerMsg))
				if set {
					row.Set = append(row.Set, m)
				} else {
					row.Single = append(row.Single, m)
				}
			}
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// brokerHTTP finds the broker's HTTP address in its "broker started"
// line.
var brokerHTTP = regexp.MustCompile(`msg="broker started" .* http=(\S+)`)

// memberReady matches a set member's line saying it serves, as a replica
// or as the master; a member's broker port follows its role.
var memberReady = child.Readiness{
	Addr:  regexp.MustCompile(`msg="serving as (?:a replica|the set's master)" .*listen=(\S+)`),
	Ready: regexp.MustCompile(`msg="serving as (?:a replica|the set's master)"`),
}

// runReplicationSide measures one run of one side on fresh processes.
func runReplicationSide(ctx context.Context, o ReplicationOptions, l replicationLoad, set bool) (SetMeasure, error) {
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.stop()
		}
	}()
	start := func(name string, ready child.Readiness, args ...string) (*server, error) {
		dir, err := os.MkdirTemp(o.TempDir, "rmq-replication-*")
		if err != nil {
			return nil, err
		}
		argv := append([]string{o.Broker, "--data-dir", dir, "--listen", "127.0.0.1:0", "--namesrv-listen", "",
			"--grpc-listen", "", "--flush", "sync"}, args...)
		p, err := child.Start(ctx, child.Options{Name: name, Argv: argv, Dir: dir, Env: o.Env, Ready: ready})
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		s := &server{Process: p, dir: dir}
		servers = append(servers, s)
		return s, nil
	}
	target, leaderPID := "", 0
	if !set {
		s, err := start("broker", child.BrokerReady, "--http-listen", "")
		if err != nil {
			return SetMeasure{}, err
		}
		target, leaderPID = s.Addr(), s.PID()
	} else {
		var err error
		if target, leaderPID, err = startSet(ctx, o.Members, start); err != nil {
			return SetMeasure{}, err
		}
	}
	pids := make([]int, len(servers))
	for i, s := range servers {
		pids[i] = s.PID()
	}
	cpu0, cpuErr := sumCPU(pids)
	io0, ioErr := bench.DeviceWriteBytes(o.TempDir)
	sum, err := bench.Produce(ctx, bench.Options{Broker: target, Size: o.Size, Conns: l.conns, InFlight: l.inflight,
		Batch: 1, Duration: o.Duration, BrokerPID: leaderPID}, nil)
	if err != nil {
		return SetMeasure{}, err
	}
	if sum.Messages == 0 {
		return SetMeasure{}, fmt.Errorf("%w: no message acknowledged; %d errors: %v", ErrRun, sum.Errors, sum.ErrorSamples)
	}
	m := SetMeasure{Measure: Measure{MsgsPerSec: sum.MsgsPerSec, Messages: sum.Messages, Elapsed: sum.Elapsed,
		CPUPerMsg: sum.BrokerCPUPerMsg, P50: sum.P50, P99: sum.P99, Errors: sum.Errors}}
	if cpu1, err := sumCPU(pids); err == nil && cpuErr == nil {
		m.AllCPUPerMsg = (cpu1 - cpu0) / time.Duration(sum.Messages)
	}
	if io1, err := bench.DeviceWriteBytes(o.TempDir); err == nil && ioErr == nil && sum.Bytes > 0 {
		m.DiskPerByte = float64(io1-io0) / float64(len(pids)) / float64(sum.Bytes)
	}
	return m, nil
}

// startSet starts n members of a set with start and returns the
// leader's broker address and process id once it serves.
func startSet(ctx context.Context, n int, start func(string, child.Readiness, ...string) (*server, error)) (string, int, error) {
	var ids, peers []string
	for i := range n {
		addr, err := spareAddr()
		if err != nil {
			return "", 0, err
		}
		ids = append(ids, fmt.Sprintf("m%d", i))
		peers = append(peers, ids[i]+"="+addr)
	}
	var https []string
	var members []*server
	for _, id := range ids {
		s, err := start("member "+id, memberReady, "--set-name", "bench", "--node-id", id, "--peers", strings.Join(peers, ","),
			"--http-listen", "127.0.0.1:0")
		if err != nil {
			return "", 0, err
		}
		// The member's role can log that it serves before the process
		// logs "broker started", with the HTTP address.
		var m []string
		for until := time.Now().Add(30 * time.Second); m == nil; {
			if m = brokerHTTP.FindStringSubmatch(s.LogTail()); m != nil {
				break
			}
			if time.Now().After(until) {
				return "", 0, fmt.Errorf("%w: member %s did not log its HTTP address: %s", ErrRun, id, s.LogTail())
			}
			select {
			case <-ctx.Done():
				return "", 0, ctx.Err()
			case <-time.After(20 * time.Millisecond): // reading the child's log: no event to wait on
			}
		}
		https = append(https, m[1])
		members = append(members, s)
	}
	// A leader is elected within a few election timeouts of the last
	// start; the set serves once it has applied its log.
	deadline := time.Now().Add(30 * time.Second)
	c := http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		for i, h := range https {
			var st struct{ State, Serving string }
			resp, err := c.Get("http://" + h + "/cluster")
			if err != nil {
				continue
			}
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			if err == nil && st.State == "Leader" && st.Serving != "" {
				return st.Serving, members[i].PID(), nil
			}
		}
		select {
		case <-ctx.Done():
			return "", 0, ctx.Err()
		case <-time.After(100 * time.Millisecond): // polling the members' HTTP endpoints: no event to wait on
		}
	}
	return "", 0, fmt.Errorf("%w: no member of the set became a serving leader in 30 s", ErrRun)
}

// spareAddr returns a loopback address with a port the kernel just
// handed out and took back, for a member's raft transport, which has to
// be known to every member before any starts.
func spareAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func sumCPU(pids []int) (time.Duration, error) {
	var t time.Duration
	for _, pid := range pids {
		c, err := bench.ProcessCPU(pid)
		if err != nil {
			return 0, err
		}
		t += c
	}
	return t, nil
}

// String tabulates r: per load, each side's median with its range, and
// the ratios the set's goals are stated in.
func (r ReplicationReport) String() string {
	header := []string{"load", "single msgs/s", "set msgs/s", "ratio", "single p99 ms", "set p99 ms", "ratio",
		"single disk B/B", "set disk B/B", "ratio", "single CPU µs/msg", "set CPU µs/msg (all members)"}
	rows := [][]string{header}
	for _, row := range r.Rows {
		one, set := row.Single, row.Set
		rate := func(ms []SetMeasure) []float64 { return field(ms, func(m SetMeasure) float64 { return m.MsgsPerSec }) }
		p99 := func(ms []SetMeasure) []float64 {
			return field(ms, func(m SetMeasure) float64 { return float64(m.P99) })
		}
		disk := func(ms []SetMeasure) []float64 { return field(ms, func(m SetMeasure) float64 { return m.DiskPerByte }) }
		all := func(ms []SetMeasure) []float64 {
			return field(ms, func(m SetMeasure) float64 { return micros(m.AllCPUPerMsg) })
		}
		rows = append(rows, []string{
			fmt.Sprintf("%d. %s", row.Load, row.Name),
			spread(rate(one), fmtRate), spread(rate(set), fmtRate), fmtRatio(median(rate(set)), median(rate(one))),
			spread(p99(one), fmtMillis), spread(p99(set), fmtMillis), fmtRatio(median(p99(set)), median(p99(one))),
			spread(disk(one), threeDigits), spread(disk(set), threeDigits), fmtRatio(median(disk(set)), median(disk(one))),
			spread(all(one), fmtMicros), spread(all(set), fmtMicros),
		})
	}
	var b strings.Builder
	bench.WriteTable(&b, rows)
	b.WriteString("\n")
	b.WriteString(bench.Wrap(fmt.Sprintf("Median (min–max) of %d round%s, each run on fresh processes with empty data directories; "+
		"%d-byte messages, synchronous sends for %v from this process to the single broker (--flush sync) or to the leader of a set of %d. "+
		"Disk: bytes written to the data directories' device (/proc/diskstats, after a sync) per body byte acknowledged, per broker (divided by the members); the machine should be quiet. "+
		"CPU: user+system time of every broker process per message.",
		r.Rounds, plural(r.Rounds), r.Size, r.Duration, r.Members), 80, ""))
	return b.String()
}

// field returns f of each measure, or nil when any is 0 (not measured).
func field(ms []SetMeasure, f func(SetMeasure) float64) []float64 {
	v := make([]float64, len(ms))
	for i, m := range ms {
		if v[i] = f(m); v[i] <= 0 {
			return nil
		}
	}
	return v
}
