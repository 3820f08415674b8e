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
// beside the log store's retention: only it (trailingDuration, and the
// rounds the commit log still holds) keeps what the member missed in the
// leader's log. It installs no snapshot, converges, and
// every acknowledged message is on every member; it receives on its raft
// port about what it missed, far less than the whole commit log.
func TestReplicatedSetMemberOutageCatchesUpFromLog(t *testing.T) {
	waitingTest(t)
	outage := outageLength()
	// The retention outlasts the outage with room for the restart.
	keep := max(10*time.Minute, outage+2*time.Minute)
	r := runOutage(t, "set-o", max(outage/5, 20*time.Second), outage, keep)
	if r.snapshots != 0 {
		t.Fatalf("the restarted member installed %d snapshots", r.snapshots)
	}
	// It receives what it missed and raft's framing; a full copy would
	// be the whole commit log.
	if r.received >= r.end || r.received < r.missed {
		t.Errorf("the restarted member received %d bytes for the %d it missed of a %d-byte commit log", r.received, r.missed, r.end)
	}
}

// TestReplicatedSetMemberOutagePastRetentionInstallsSnapshot is the same
// outage with a raft log that keeps only raft's trailingLogs (a negative
// trailingDuration): the leader's log no longer holds what the member
// missed, so it installs a snapshot, a copy of the whole commit log, and
// still converges with every acknowledged message.
func TestReplicatedSetMemberOutagePastRetentionInstallsSnapshot(t *testing.T) {
	waitingTest(t)
	r := runOutage(t, "set-p", 10*time.Second, 10*time.Second, -time.Second)
	if r.snapshots == 0 {
		t.Fatal("the member away past the retention installed no snapshot")
	}
	if r.received < r.end {
		t.Errorf("the member received %d bytes, less than the %d-byte commit log a snapshot copies", r.received, r.end)
	}
}

// outageResult is what runOutage measured on the restarted member.
type outageResult struct {
	snapshots int64 // snapshots it installed after its restart
	missed    int64 // bytes the commit log grew while it was down
	end       int64 // the commit log's end when it restarted
	received  int64 // bytes it read from its raft port until it converged
	read      int64 // bytes its process read (rchar), files included
}

// runOutage runs a set of three whose members snapshot often and keep
// the raft log of the last keep, sends for warm, kills a follower with
// SIGKILL, sends on for outage, stops the load and restarts the follower.
// It waits for the set to converge and checks every acknowledged message
// is stored on every member, once per try at most.
//
// What the member received is raftReceived in its /cluster: the bytes it
// read, since it started, from connections to its raft port (entries,
// heartbeats, snapshots). The test also logs rchar from /proc/<pid>/io,
// every byte the process read, its own files included: opening a store
// reads a good part of it. The load stops before the restart, so what
// the member missed is fixed: the leader's commit-log end then, less the
// member's just before it was killed. Sends are tried until acknowledged
// and a send that timed out may have been stored: a message that took
// more than one try may be stored once per try, every other exactly once.
func runOutage(t *testing.T, name string, warm, outage, keep time.Duration) outageResult {
	ns := startNamesrv(t)
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
	r := outageResult{snapshots: after.SnapshotsInstalled, missed: end - before.CommitLogEnd, end: end, received: after.RaftReceived, read: read}
	t.Logf("down %s, %d messages acknowledged: the member missed %d bytes of a %d-byte commit log, installed %d snapshots and received %d bytes on its raft port until it converged (its process read %d, files included)",
		outage, len(acked), r.missed, r.end, r.snapshots, r.received, r.read)

	got := rs.storedBodies(topic)
	ids := make(map[string]int, len(got))
	for body, k := range got {
		id, _, _ := strings.Cut(body, "|")
		ids[id] += k
	}
	retried := 0
	for id, tries := range acked {
		if tries > 1 {
			retried++
		}
		if ids[id] < 1 || ids[id] > tries {
			t.Errorf("acknowledged %s (sent %d times) is stored %d times on the members", id, tries, ids[id])
		}
	}
	for id := range ids {
		if acked[id] == 0 {
			t.Errorf("the members hold %s, which was never acknowledged", id)
		}
	}
	t.Logf("%d messages stored on each member; %d took more than one try", len(ids), retried)
	return r
}

// outageStatus is the part of a member's /cluster answer runOutage reads.
type outageStatus struct {
	CommitLogEnd       int64 `json:"commitLogEnd"`
	SnapshotsInstalled int64 `json:"snapshotsInstalled"`
	RaftReceived       int64 `json:"raftReceived"`
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
// acknowledged (the client's own retries are off, so every try counts).
type load struct {
	done chan struct{}
	wg   sync.WaitGroup
	mu   struct {
		sync.Mutex
		acked map[string]int // the tries of each acknowledged message, by id
	}
}

// startLoad starts conns producers sending rate messages a second each.
// A message's body is its id, "|" and padding to 1 KiB.
func startLoad(t *testing.T, namesrv, topic string, conns, rate int) *load {
	t.Helper()
	ld := &load{done: make(chan struct{})}
	ld.mu.acked = map[string]int{}
	for c := range conns {
		p, err := producer.NewDefaultProducer(
			producer.WithNsResolver(primitive.NewPassthroughResolver([]string{namesrv})),
			producer.WithInstanceName(brokertest.Name(fmt.Sprintf("outage-%d", c))),
			producer.WithRetry(0),
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
				tries := 1
				for ; ; tries++ {
					res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, body))
					if err == nil && res.Status == primitive.SendOK {
						break
					}
					if time.Now().After(deadline) {
						t.Errorf("%s not acknowledged in 30 s: %v", id, err)
						return
					}
					if err == nil {
						err = fmt.Errorf("status %v", res.Status)
					}
					t.Logf("sending %s again: %v", id, err)
				}
				ld.mu.Lock()
				ld.mu.acked[id] = tries
				ld.mu.Unlock()
			}
		}()
	}
	return ld
}

// stop stops the producers once their messages in flight are
// acknowledged and returns the acknowledged messages' tries by id.
func (ld *load) stop() map[string]int {
	close(ld.done)
	ld.wg.Wait()
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.mu.acked
}
