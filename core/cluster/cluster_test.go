package cluster_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/hashicorp/raft"
	"github.com/rmq-go/rmq/core/cluster"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// faultLayer is a TCP stream layer the test can cut off from the others,
// both ways, as a network partition would.
type faultLayer struct {
	net.Listener
	cut      atomic.Bool
	received atomic.Int64 // bytes read from connections the member accepted
	mu       sync.Mutex
	conns    []net.Conn
}

// countConn counts the bytes read from a connection.
type countConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}

func newFaultLayer(t testing.TB) *faultLayer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return &faultLayer{Listener: ln}
}

func (l *faultLayer) track(c net.Conn) {
	l.mu.Lock()
	l.conns = append(l.conns, c)
	l.mu.Unlock()
}

func (l *faultLayer) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.cut.Load() {
			c.Close()
			continue
		}
		l.track(c)
		return countConn{c, &l.received}, nil
	}
}

func (l *faultLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	if l.cut.Load() {
		return nil, errors.New("partitioned")
	}
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err == nil {
		l.track(c)
	}
	return c, err
}

// partition cuts the member off (true) or heals it (false).
func (l *faultLayer) partition(on bool) {
	l.cut.Store(on)
	if on {
		l.mu.Lock()
		for _, c := range l.conns {
			c.Close()
		}
		l.conns = nil
		l.mu.Unlock()
	}
}

type member struct {
	opts  cluster.Options
	layer *faultLayer
	node  *cluster.Node
	// fault makes every write to the member's commit log fail while set,
	// restoreFault every write of a segment a snapshot restores.
	fault, restoreFault atomic.Bool
	// hold, while set, makes every sync of the member's commit log wait
	// until the channel is closed.
	hold atomic.Pointer[chan struct{}]
}

type set struct {
	t       testing.TB
	members []*member
}

// faultFS is the OS filesystem, with the member's commit-log writes
// failing while m.fault is set.
func faultFS(m *member) vfs.FS {
	return errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if m.fault.Load() && op.Kind == errorfs.OpFileWriteAt && strings.Contains(op.Path, "commitlog") {
			return errorfs.ErrInjected
		}
		if m.restoreFault.Load() && op.Kind == errorfs.OpFileWrite && strings.Contains(op.Path, "commitlog") {
			return errorfs.ErrInjected
		}
		if h := m.hold.Load(); h != nil && strings.Contains(op.Path, "commitlog") &&
			(op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo) {
			<-*h
		}
		return nil
	}))
}

// quiet discards the members' logs; RMQ_TEST_LOG=1 shows them, with
// raft's, when a test needs explaining.
func quiet() *slog.Logger {
	if os.Getenv("RMQ_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func fastOptions(o *cluster.Options) {
	o.HeartbeatTimeout = 300 * time.Millisecond
	o.ElectionTimeout = 300 * time.Millisecond
	o.LeaderLeaseTimeout = 200 * time.Millisecond
}

func newSet(t testing.TB, n int, tune func(*cluster.Options)) *set {
	s := &set{t: t}
	var peers []cluster.Peer
	for i := range n {
		l := newFaultLayer(t)
		peers = append(peers, cluster.Peer{ID: fmt.Sprintf("n%d", i), Addr: l.Addr().String()})
		s.members = append(s.members, &member{layer: l})
	}
	for i, m := range s.members {
		dir := t.TempDir()
		m.opts = cluster.Options{SetName: "set-a", NodeID: peers[i].ID, Peers: peers, Dir: dir + "/raft",
			Store: store.Options{Dir: dir + "/store", SegmentSize: 1 << 20, Logger: quiet(), FS: faultFS(m)}, Logger: quiet()}
		fastOptions(&m.opts)
		if tune != nil {
			tune(&m.opts)
		}
		s.start(m)
	}
	t.Cleanup(func() {
		for _, m := range s.members {
			if m.node != nil {
				m.node.Close()
			}
		}
	})
	return s
}

func (s *set) start(m *member) {
	s.t.Helper()
	if m.opts.TLS != nil {
		m.layer.Close() // the node listens itself, with TLS
		m.opts.StreamLayer = nil
	} else {
		m.opts.StreamLayer = m.layer
	}
	node, err := cluster.Open(m.opts)
	if err != nil {
		s.t.Fatal(err)
	}
	m.node = node
}

// restart opens a stopped member again on a fresh listener at its address.
func (s *set) restart(m *member) {
	s.t.Helper()
	ln, err := net.Listen("tcp", m.layer.Addr().String())
	if err != nil {
		s.t.Fatal(err)
	}
	m.layer = &faultLayer{Listener: ln}
	s.start(m)
}

func (s *set) stop(m *member) {
	s.t.Helper()
	if err := m.node.Close(); err != nil {
		s.t.Logf("close %s: %v", m.opts.NodeID, err)
	}
	m.node = nil
}

// leader waits for a writable leader among the running members other
// than not.
func (s *set) leader(not *member) *member {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range s.members {
			if m != not && m.node != nil && m.node.Leading() && m.node.Store().Writable() {
				return m
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatal("no leader elected")
	return nil
}

func msg(topic string, q int32, body string) *message.Message {
	return &message.Message{Topic: topic, QueueID: q, Body: []byte(body), BornTimestamp: 1}
}

// appendN appends n messages from 8 goroutines and returns the bodies
// acknowledged.
func appendN(st *store.Store, prefix string, n int) (acked []string, errs int) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 8 {
				body := fmt.Sprintf("%s-%d", prefix, i)
				err := st.Append([]*message.Message{msg("T", int32(i%4), body)})
				mu.Lock()
				if err == nil {
					acked = append(acked, body)
				} else {
					errs++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return acked, errs
}

// bodies reads every record of topic T's four queues.
func bodies(t testing.TB, st *store.Store) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for q := range int32(4) {
		it := st.NewQueueIter("T", q, store.IterOptions{})
		for ok := it.SeekGE(0); ok; ok = it.Next() {
			rec := it.Record()
			if rec.QueueID() != q {
				t.Fatalf("record of queue %d in queue %d", rec.QueueID(), q)
			}
			seen[string(rec.Body())]++
		}
		if err := it.Error(); err != nil {
			t.Fatal(err)
		}
		it.Close()
	}
	return seen
}

// waitSame waits until every running member's store holds what want
// holds, queue by queue.
func (s *set) waitSame(want *store.Store) {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		same := true
		for _, m := range s.members {
			if m.node == nil {
				continue
			}
			for q := range int32(4) {
				if m.node.Store().MaxOffset("T", q) != want.MaxOffset("T", q) {
					same = false
				}
			}
		}
		if same {
			break
		}
		if time.Now().After(deadline) {
			s.t.Fatal("members did not converge")
		}
		time.Sleep(20 * time.Millisecond)
	}
	ref := bodies(s.t, want)
	_, refEnd := want.CommitLogOffsets()
	for _, m := range s.members {
		if m.node == nil {
			continue
		}
		got := bodies(s.t, m.node.Store())
		if len(got) != len(ref) {
			s.t.Fatalf("%s holds %d messages, the leader %d", m.opts.NodeID, len(got), len(ref))
		}
		for b, c := range got {
			if c != 1 || ref[b] != 1 {
				s.t.Fatalf("%s: message %s stored %d times (leader %d)", m.opts.NodeID, b, c, ref[b])
			}
		}
		if _, end := m.node.Store().CommitLogOffsets(); end != refEnd {
			s.t.Fatalf("%s: commit log ends at %d, the leader's at %d", m.opts.NodeID, end, refEnd)
		}
	}
}

func TestReplicatedAppendsAndState(t *testing.T) {
	s := newSet(t, 3, nil)
	l := s.leader(nil)
	st := l.node.Store()
	acked, errs := appendN(st, "a", 400)
	if errs != 0 || len(acked) != 400 {
		t.Fatalf("%d acknowledged, %d failed", len(acked), errs)
	}
	if err := st.CommitOffset("g", "T", 1, 42); err != nil {
		t.Fatal(err)
	}
	if err := st.PutMeta("topic/T", []byte(`{"queues":4}`)); err != nil {
		t.Fatal(err)
	}
	if err := st.PutKeys([]byte("timer/1")); err != nil {
		t.Fatal(err)
	}
	s.waitSame(st)
	for _, m := range s.members {
		if m == l {
			continue
		}
		f := m.node.Store()
		if f.Writable() {
			t.Fatalf("follower %s takes writes", m.opts.NodeID)
		}
		if err := f.Append([]*message.Message{msg("T", 0, "x")}); !errors.Is(err, store.ErrNotLeader) {
			t.Fatalf("append on a follower: %v", err)
		}
		waitFor(t, "metadata replicated", func() bool {
			v, err := f.Meta("topic/T")
			return err == nil && string(v) == `{"queues":4}`
		})
		waitFor(t, "offset replicated", func() bool {
			off, ok := f.ConsumerOffset("g", "T", 1)
			return ok && off == 42
		})
		waitFor(t, "timer key replicated", func() bool {
			found := false
			f.ScanKeys([]byte("timer/"), nil, func(k []byte) bool { found = true; return false })
			return found
		})
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestLeaderSendsWhileItStores checks that a leader's followers store an
// entry while the leader's own store of it is still under way, and that
// the append is acknowledged only once the leader's copy is stored too.
func TestLeaderSendsWhileItStores(t *testing.T) {
	s := newSet(t, 3, nil)
	l := s.leader(nil)
	st := l.node.Store()
	if acked, _ := appendN(st, "warm", 8); len(acked) != 8 {
		t.Fatalf("%d of 8 acknowledged", len(acked))
	}
	last := l.node.Status().LastIndex
	hold := make(chan struct{})
	l.hold.Store(&hold)
	released := false
	release := func() {
		if !released {
			released = true
			l.hold.Store(nil)
			close(hold)
		}
	}
	defer release()
	done := make(chan error, 1)
	go func() { done <- st.Append([]*message.Message{msg("T", 0, "held")}) }()
	for _, m := range s.members {
		if m == l {
			continue
		}
		waitFor(t, m.opts.NodeID+" stores the entry the leader holds", func() bool {
			return m.node.Status().LastIndex > last
		})
	}
	select {
	case err := <-done:
		t.Fatalf("append acknowledged (%v) before the leader stored its entry", err)
	default:
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.waitSame(st)
}

// TestFailoverKeepsAcknowledged stops the leader while appends run, many
// times: every acknowledged message is on the new leader exactly once,
// and the stopped member catches up when it comes back.
func TestFailoverKeepsAcknowledged(t *testing.T) {
	s := newSet(t, 3, nil)
	all := map[string]bool{}
	rounds := 5
	if testing.Short() {
		rounds = 2
	}
	for round := range rounds {
		l := s.leader(nil)
		base := l.node.Status().AppliedIndex
		var acked []string
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			acked, _ = appendN(l.node.Store(), fmt.Sprintf("r%d", round), 2000)
		}()
		waitFor(t, "appends under way", func() bool { return l.node.Status().AppliedIndex > base+20 })
		s.stop(l)
		wg.Wait()
		t.Logf("round %d: %d of 2000 acknowledged before the leader stopped", round, len(acked))
		for _, b := range acked {
			all[b] = true
		}
		nl := s.leader(l)
		got := bodies(t, nl.node.Store())
		for b := range all {
			if got[b] != 1 {
				t.Fatalf("round %d: acknowledged %s found %d times on the new leader", round, b, got[b])
			}
		}
		for b, c := range got {
			if c != 1 {
				t.Fatalf("round %d: %s stored %d times", round, b, c)
			}
		}
		s.restart(l)
		if more, errs := appendN(nl.node.Store(), fmt.Sprintf("after%d", round), 40); errs != 0 {
			t.Fatalf("appends to the new leader failed: %d", errs)
		} else {
			for _, b := range more {
				all[b] = true
			}
		}
		s.waitSame(nl.node.Store())
	}
}

// TestPartitionedLeaderStops cuts the leader off: it stops taking writes,
// the majority elects another, and when healed the old leader follows
// the new log.
func TestPartitionedLeaderStops(t *testing.T) {
	s := newSet(t, 3, nil)
	old := s.leader(nil)
	if _, errs := appendN(old.node.Store(), "before", 100); errs != 0 {
		t.Fatal("appends failed before the partition")
	}
	old.layer.partition(true)
	waitFor(t, "the cut-off leader stops taking writes", func() bool { return !old.node.Store().Writable() })
	if err := old.node.Store().Append([]*message.Message{msg("T", 0, "stale")}); err == nil {
		t.Fatal("a leader without its majority acknowledged an append")
	}
	nl := s.leader(old)
	if _, errs := appendN(nl.node.Store(), "after", 100); errs != 0 {
		t.Fatal("appends to the new leader failed")
	}
	old.layer.partition(false)
	s.waitSame(nl.node.Store())
	if got := bodies(t, old.node.Store()); got["stale"] != 0 {
		t.Fatal("the unacknowledged append survived on the old leader")
	}
}

// TestFarBehindReplicaInstallsSnapshot stops a replica, moves the log on
// past what raft keeps, and restarts it: it installs a snapshot.
func TestFarBehindReplicaInstallsSnapshot(t *testing.T) {
	s := newSet(t, 3, func(o *cluster.Options) {
		o.SnapshotThreshold = 64
		o.TrailingLogs = 16
		o.TrailingDuration = -1        // raft's TrailingLogs alone: the replica is away longer
		o.Store.SegmentSize = 16 << 10 // the log spans several segments
	})
	l := s.leader(nil)
	var behind *member
	for _, m := range s.members {
		if m != l {
			behind = m
			break
		}
	}
	appendN(l.node.Store(), "early", 100)
	s.stop(behind)
	for i := range 5 {
		if _, errs := appendN(l.node.Store(), fmt.Sprintf("late%d", i), 200); errs != 0 {
			t.Fatal("appends failed")
		}
	}
	if err := l.node.Store().CommitOffset("g", "T", 2, 7); err != nil {
		t.Fatal(err)
	}
	if err := l.node.Store().PutMeta("topic/T", []byte("v")); err != nil {
		t.Fatal(err)
	}
	l.node.Store().Checkpoint() // proposes the offset
	waitFor(t, "offset committed", func() bool { return l.node.Status().CommitIndex == l.node.Status().AppliedIndex })
	if err := l.node.Snapshot(); err != nil {
		t.Fatal(err)
	}
	// What the leader keeps for a snapshot is a manifest, not the log.
	_, logEnd := l.node.Store().CommitLogOffsets()
	kept, _ := filepath.Glob(filepath.Join(l.opts.Dir, "snapshots", "*", "state.bin"))
	for _, f := range kept {
		if fi, err := os.Stat(f); err != nil || fi.Size() > logEnd/4 {
			t.Fatalf("snapshot file %s: %v bytes for a log of %d", f, fi.Size(), logEnd)
		}
	}
	if len(kept) == 0 || logEnd < 3*(16<<10) {
		t.Fatalf("%d snapshots kept, a log of %d bytes", len(kept), logEnd)
	}
	s.restart(behind)
	s.waitSame(l.node.Store())
	if n := behind.node.Status().SnapshotsInstalled; n == 0 {
		t.Fatal("the replica caught up without a snapshot")
	}
	if v, err := behind.node.Store().Meta("topic/T"); err != nil || string(v) != "v" {
		t.Fatalf("metadata after the snapshot: %q %v", v, err)
	}
	if off, ok := behind.node.Store().ConsumerOffset("g", "T", 2); !ok || off != 7 {
		t.Fatalf("offset after the snapshot: %d %v", off, ok)
	}
}

// TestRestartedReplicaCatchesUpFromLog stops a replica while the others
// take writes and snapshots, far past raft's TrailingLogs, and restarts
// it: it catches up from the leader's log, receiving about what it missed
// rather than the whole commit log. The log keeps what it missed for its
// age (the default TrailingDuration), or, past that age, because the
// leader's commit log still holds the rounds.
func TestRestartedReplicaCatchesUpFromLog(t *testing.T) {
	for _, tc := range []struct {
		name string
		age  time.Duration
	}{{"within the age", 0}, {"past the age", time.Nanosecond}} {
		t.Run(tc.name, func(t *testing.T) { restartedReplicaCatchesUp(t, tc.age) })
	}
}

func restartedReplicaCatchesUp(t *testing.T, age time.Duration) {
	s := newSet(t, 3, func(o *cluster.Options) {
		o.SnapshotThreshold = 64
		o.TrailingLogs = 16
		o.TrailingDuration = age
		o.Store.SegmentSize = 16 << 10
	})
	l := s.leader(nil)
	var behind *member
	for _, m := range s.members {
		if m != l {
			behind = m
			break
		}
	}
	body := strings.Repeat("x", 400)
	if _, errs := appendN(l.node.Store(), "early"+body, 400); errs != 0 {
		t.Fatal("appends failed")
	}
	s.waitSame(l.node.Store())
	_, stopped := l.node.Store().CommitLogOffsets()
	s.stop(behind)
	first := l.node.Status().LastIndex
	for i := range 4 {
		if _, errs := appendN(l.node.Store(), fmt.Sprintf("late%d%s", i, body), 100); errs != 0 {
			t.Fatal("appends failed")
		}
		if err := l.node.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	// raft alone would have compacted the log to TrailingLogs behind its
	// end, past where the stopped replica's log ends; the leader's status
	// shows its log reaching back to it.
	st := l.node.Status()
	if moved := st.LastIndex - first; moved < 2*16 {
		t.Fatalf("the log moved %d entries, not past TrailingLogs", moved)
	}
	if span, err := time.ParseDuration(st.LogSpan); st.FirstIndex == 0 || st.FirstIndex > first+1 || err != nil || span < 0 {
		t.Fatalf("the leader's log starts at %d, %q ago (%v); the stopped replica's ended at %d", st.FirstIndex, st.LogSpan, err, first)
	}
	_, end := l.node.Store().CommitLogOffsets()
	s.restart(behind)
	s.waitSame(l.node.Store())
	if n := behind.node.Status().SnapshotsInstalled; n != 0 {
		t.Fatalf("the replica installed %d snapshots", n)
	}
	got, missed := behind.layer.received.Load(), end-stopped
	t.Logf("missed %d bytes of a %d-byte commit log, received %d over raft", missed, end, got)
	if got > missed+missed/2+64<<10 || got >= end {
		t.Fatalf("received %d bytes for %d missed (commit log %d)", got, missed, end)
	}
}

// TestRollingRestartInstallsNoSnapshot restarts each member in turn, the
// leader included, while the set takes writes and snapshots: no member
// installs a snapshot, each catches up from the log.
func TestRollingRestartInstallsNoSnapshot(t *testing.T) {
	s := newSet(t, 3, func(o *cluster.Options) {
		o.SnapshotThreshold = 64
		o.TrailingLogs = 16
		o.Store.SegmentSize = 16 << 10
	})
	for i, m := range s.members {
		s.stop(m)
		l := s.leader(m)
		if _, errs := appendN(l.node.Store(), fmt.Sprintf("r%d", i), 200); errs != 0 {
			t.Fatal("appends failed")
		}
		if err := l.node.Snapshot(); err != nil {
			t.Fatal(err)
		}
		s.restart(m)
		s.waitSame(l.node.Store())
	}
	for _, m := range s.members {
		if n := m.node.Status().SnapshotsInstalled; n != 0 {
			t.Fatalf("%s installed %d snapshots", m.opts.NodeID, n)
		}
	}
	if got := bodies(t, s.leader(nil).node.Store()); len(got) != 600 {
		t.Fatalf("%d messages after the restarts", len(got))
	}
}

// TestDeleteTopicReplicates deletes a topic on the leader and writes it
// again: every member drops the old queues and holds the new ones, and a
// member restarted afterwards, which replays the raft log, keeps them.
func TestDeleteTopicReplicates(t *testing.T) {
	s := newSet(t, 3, nil)
	l := s.leader(nil)
	st := l.node.Store()
	if _, errs := appendN(st, "old", 80); errs != 0 {
		t.Fatal("appends failed")
	}
	if err := st.DeleteTopic("T"); err != nil {
		t.Fatal(err)
	}
	if _, errs := appendN(st, "new", 40); errs != 0 {
		t.Fatal("appends failed")
	}
	s.waitSame(st)
	for _, m := range s.members {
		got := bodies(t, m.node.Store())
		if len(got) != 40 || got["old-0"] != 0 || got["new-0"] != 1 {
			t.Fatalf("%s after the deletion: %d messages", m.opts.NodeID, len(got))
		}
	}
	var f *member
	for _, m := range s.members {
		if m != l {
			f = m
			break
		}
	}
	s.stop(f)
	s.restart(f)
	commit := l.node.Status().CommitIndex
	waitFor(t, "the restarted member to replay the log", func() bool { return f.node.Status().AppliedIndex >= commit })
	s.waitSame(st)
	if got := bodies(t, f.node.Store()); len(got) != 40 || got["new-39"] != 1 {
		t.Fatalf("restarted member holds %d messages of the new topic", len(got))
	}
}

// TestTLSRaftPort runs a set whose raft port takes only members holding
// the set's certificate: the set replicates, and a stranger without one
// is refused.
func TestTLSRaftPort(t *testing.T) {
	certFile, keyFile, pool := brokertest.WriteCert(t, t.TempDir(), "member")
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	server := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	client := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}, RootCAs: pool}
	var addrs []string
	s := newSet(t, 3, func(o *cluster.Options) {
		o.StreamLayer = nil // ListenTCP on the member's address, with TLS
		o.TLS, o.DialTLS = server, client
		for _, p := range o.Peers {
			if p.ID == o.NodeID {
				addrs = append(addrs, p.Addr)
			}
		}
	})
	st := s.leader(nil).node.Store()
	if _, errs := appendN(st, "tls", 40); errs != 0 {
		t.Fatal("appends failed over TLS")
	}
	s.waitSame(st)
	conn, err := tls.Dial("tcp", addrs[0], &tls.Config{RootCAs: pool})
	if err == nil {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		conn.Write([]byte{0})
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	// Refused, the read fails at once with the server's alert; served, it
	// would wait for the rest of a request until the deadline.
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a connection without a member's certificate was served (%v)", err)
	}
}

// TestRetentionUnderSnapshots runs retention that wants every sealed
// segment gone, every few milliseconds, while the set takes writes and
// snapshots: each member keeps the rounds after its newest snapshot,
// which raft replays from the commit log after a restart. A member
// stopped and restarted replays them and catches up; a member that fell
// behind what the leader kept installs a snapshot instead.
func TestRetentionUnderSnapshots(t *testing.T) {
	s := newSet(t, 3, func(o *cluster.Options) {
		o.SnapshotThreshold = 32
		o.SnapshotInterval = 20 * time.Millisecond
		o.TrailingLogs = 8
		o.TrailingDuration = -1
		o.Store.SegmentSize = 64 << 10
		o.Store.Retention = time.Millisecond
		o.Store.RetentionInterval = 5 * time.Millisecond
		o.Store.DiskHighWater = -1
	})
	l := s.leader(nil)
	var f *member
	for _, m := range s.members {
		if m != l {
			f = m
			break
		}
	}
	body := strings.Repeat("r", 1000)
	if _, errs := appendN(l.node.Store(), "early"+body, 600); errs != 0 {
		t.Fatal("appends failed")
	}
	s.stop(f)
	s.restart(f)
	if _, errs := appendN(l.node.Store(), "late"+body, 600); errs != 0 {
		t.Fatal("appends failed")
	}
	commit := l.node.Status().CommitIndex
	for _, m := range s.members {
		waitFor(t, m.opts.NodeID+" applies the log", func() bool { return m.node.Status().AppliedIndex >= commit })
	}
	if err := f.node.Failed(); err != nil {
		t.Fatalf("the restarted member failed: %v", err)
	}
	for _, m := range s.members {
		if lo, _ := m.node.Store().CommitLogOffsets(); lo == 0 {
			t.Fatalf("%s's retention deleted nothing", m.opts.NodeID)
		}
		for q := range int32(4) {
			if got, want := m.node.Store().MaxOffset("T", q), l.node.Store().MaxOffset("T", q); got != want {
				t.Fatalf("%s: queue %d ends at %d, the leader's at %d", m.opts.NodeID, q, got, want)
			}
		}
	}
}
