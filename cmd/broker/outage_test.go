package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// outageLength is how long TestReplicatedSetMemberOutageCatchesUpFromLog
// keeps its member down: 30 s in the normal run (CI's short form), 10
// minutes with RMQ_LONG_FAULTS=1.
func outageLength() time.Duration {
	if os.Getenv("RMQ_LONG_FAULTS") == "1" {
		return 10 * time.Minute
	}
	return 30 * time.Second
}

// TestReplicatedSetMemberOutageCatchesUpFromLog kills a follower of a set
// of three with SIGKILL while four official producers send 1 KiB
// messages, keeps it down for outageLength under that load and starts it
// again. The members snapshot every second or so, leaving 16 entries
// beside the retention: only trailingDuration keeps what the member
// missed in the leader's log. It installs no snapshot, converges, and
// every acknowledged message is stored once on every member; the test
// reports what the member read while catching up against what it missed.
func TestReplicatedSetMemberOutageCatchesUpFromLog(t *testing.T) {
	outage := outageLength()
	// The retention outlasts the outage with room for the restart.
	keep := max(10*time.Minute, outage+2*time.Minute)
	r := runOutage(t, "set-o", max(outage/5, 20*time.Second), outage, keep)
	if r.snapshots != 0 {
		t.Fatalf("the restarted member installed %d snapshots", r.snapshots)
	}
	// What the member read beyond a restart that missed nothing is what
	// it received; a full copy would be the whole commit log.
	if got := r.read - r.idle; got >= r.end {
		t.Errorf("the restarted member received %d bytes for the %d it missed, as much as a full copy of the %d-byte commit log", got, r.missed, r.end)
	}
}

// TestReplicatedSetMemberOutagePastRetentionInstallsSnapshot is the same
// outage with a retention of one second: the leader's log no longer
// holds what the member missed, so it installs a snapshot, a copy of the
// whole commit log, and still converges with every acknowledged message.
func TestReplicatedSetMemberOutagePastRetentionInstallsSnapshot(t *testing.T) {
	r := runOutage(t, "set-p", 10*time.Second, 10*time.Second, time.Second)
	if r.snapshots == 0 {
		t.Fatal("the member away past the retention installed no snapshot")
	}
}

// outageResult is what runOutage measured on the restarted member.
type outageResult struct {
	snapshots int64 // snapshots it installed after its restart
	missed    int64 // bytes the commit log grew while it was down
	end       int64 // the commit log's end when it restarted
	read      int64 // bytes the member's process read (rchar) until it converged
	idle      int64 // the same for a restart right after, which missed nothing
}

// runOutage runs a set of three whose members snapshot often and keep
// the raft log of the last keep, sends for warm, kills a follower with
// SIGKILL, sends on for outage, stops the load and restarts the follower.
// It waits for the set to converge and checks every acknowledged message
// is stored once on every member.
//
// What the member received is measured from its process: rchar in
// /proc/<pid>/io counts every byte its read calls returned since it
// started, socket reads (raft's traffic, the members' and the test's
// HTTP) and file reads (opening its store and raft log). A child's raft
// port has no counter of its own, so the member is killed and started
// once more after it converged: that restart missed nothing, and its
// rchar is the part of the first that was not catching up. The load stops
// before the restart, so what the member missed is fixed: the leader's
// commit-log end then, less the member's just before it was killed.
func runOutage(t *testing.T, name string, warm, outage, keep time.Duration) outageResult {
	ns, err := server.StartNamesrv(server.Config{NamesrvListen: "127.0.0.1:0", Logger: brokertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown(context.Background())
	conf := filepath.Join(t.TempDir(), "member.yaml")
	yaml := fmt.Sprintf("cluster:\n  snapshotInterval: 1s\n  snapshotThreshold: 16\n  trailingLogs: 16\n  trailingDuration: %s\n", keep)
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := startSetWith(t, name, 3, []string{ns.NamesrvAddr}, "--config", conf)
	const topic = "Outage"
	createSetTopic(t, rs, ns.NamesrvAddr, topic)
	leader := rs.leader()
	var away *setMember
	for _, m := range rs.members {
		if m != leader {
			away = m
			break
		}
	}

	ld := startLoad(t, ns.NamesrvAddr, topic, 4, 50)
	time.Sleep(warm) // the load runs for warm: a duration, not an event
	before := outageStatusOf(t, away)
	rs.kill(away, syscall.SIGKILL)
	time.Sleep(outage) // the member stays down for outage under the load
	acked := ld.stop()
	if t.Failed() {
		t.FailNow()
	}
	end := outageStatusOf(t, rs.leader()).CommitLogEnd

	rs.start(away)
	rs.converged()
	after := outageStatusOf(t, away)
	read := procIO(t, away.cmd.Process.Pid)["rchar"]
	if after.CommitLogEnd != end {
		t.Fatalf("the member's commit log ends at %d, the leader's at %d", after.CommitLogEnd, end)
	}
	// The same member killed and started again at once, having missed
	// nothing, reads what opening its files and joining the set take.
	rs.kill(away, syscall.SIGKILL)
	rs.start(away)
	rs.converged()
	idle := procIO(t, away.cmd.Process.Pid)["rchar"]
	r := outageResult{snapshots: after.SnapshotsInstalled, missed: end - before.CommitLogEnd, end: end, read: read, idle: idle}
	t.Logf("down %s, %d messages acknowledged: the member missed %d bytes of a %d-byte commit log, installed %d snapshots and read %d bytes (rchar) until it converged, %d more than the %d of a restart that missed nothing",
		outage, len(acked), r.missed, r.end, r.snapshots, r.read, r.read-r.idle, r.idle)

	got := rs.storedBodies(topic)
	ids := make(map[string]int, len(got))
	for body, k := range got {
		id, _, _ := strings.Cut(body, "|")
		ids[id] += k
	}
	for id := range acked {
		if ids[id] != 1 {
			t.Errorf("acknowledged %s is stored %d times on the members", id, ids[id])
		}
	}
	if len(ids) != len(acked) {
		t.Errorf("the members hold %d messages, %d were acknowledged", len(ids), len(acked))
	}
	return r
}

// outageStatus is the part of a member's /cluster answer runOutage reads.
type outageStatus struct {
	CommitLogEnd       int64 `json:"commitLogEnd"`
	SnapshotsInstalled int64 `json:"snapshotsInstalled"`
}

func outageStatusOf(t *testing.T, m *setMember) outageStatus {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + m.http + "/cluster")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st outageStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// procIO reads the counters of /proc/<pid>/io.
func procIO(t *testing.T, pid int) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatal(err)
	}
	io := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, _ := strings.Cut(line, ":")
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/io: %q", pid, line)
		}
		io[k] = n
	}
	return io
}

// load sends 1 KiB messages with official producers, each on a
// connection of its own, at a steady rate, each message tried until it is
// acknowledged.
type load struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   struct {
		sync.Mutex
		acked map[string]bool // the ids of acknowledged messages
	}
}

// startLoad starts conns producers sending rate messages a second each.
// A message's body is its id, "|" and padding to 1 KiB.
func startLoad(t *testing.T, namesrv, topic string, conns, rate int) *load {
	t.Helper()
	ld := &load{done: make(chan struct{})}
	ld.mu.acked = map[string]bool{}
	for c := range conns {
		p, err := producer.NewDefaultProducer(
			producer.WithNsResolver(primitive.NewPassthroughResolver([]string{namesrv})),
			producer.WithInstanceName(brokertest.Name(fmt.Sprintf("outage-%d", c))),
			producer.WithRetry(2),
			producer.WithSendMsgTimeout(5*time.Second),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		ld.wg.Add(1)
		go func() {
			defer ld.wg.Done()
			defer p.Shutdown()
			tick := time.NewTicker(time.Second / time.Duration(rate))
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-ld.done:
					return
				case <-tick.C:
				}
				id := fmt.Sprintf("p%d-%d", c, i)
				body := []byte(id + "|" + strings.Repeat("x", 1024-len(id)-1))
				deadline := time.Now().Add(30 * time.Second)
				for {
					res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, body))
					if err == nil && res.Status == primitive.SendOK {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("%s not acknowledged in 30 s: %v", id, err)
						return
					}
				}
				ld.mu.Lock()
				ld.mu.acked[id] = true
				ld.mu.Unlock()
			}
		}()
	}
	return ld
}

// stop stops the producers once their messages in flight are
// acknowledged and returns the ids of every acknowledged message.
func (ld *load) stop() map[string]bool {
	close(ld.done)
	ld.wg.Wait()
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.mu.acked
}
