package cluster_test

import (
	"errors"
	"io"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// gatedFSM blocks in its first Apply until gate closes.
type gatedFSM struct {
	gate    chan struct{}
	entered atomic.Bool
}

func (f *gatedFSM) Apply(*raft.Log) any {
	if f.entered.CompareAndSwap(false, true) {
		<-f.gate
	}
	return nil
}

func (f *gatedFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("no snapshots") }

func (f *gatedFSM) Restore(r io.ReadCloser) error { return r.Close() }

// TestApplyFuturesEndAtShutdown: raft hands committed entries to its FSM
// through a queue, and when it shuts down its FSM goroutine returns,
// leaving what is still queued. Every future of an Apply must still end,
// with ErrRaftShutdown, rather than wait forever: Node.Close waits for
// the goroutine that waits on them (the cause of a hang of
// TestFailoverKeepsAcknowledged when a leader was stopped under appends).
func TestApplyFuturesEndAtShutdown(t *testing.T) {
	fsm := &gatedFSM{gate: make(chan struct{})}
	conf := raft.DefaultConfig()
	conf.LocalID = "a"
	conf.Logger = hclog.NewNullLogger()
	conf.HeartbeatTimeout, conf.ElectionTimeout = 50*time.Millisecond, 50*time.Millisecond
	conf.LeaderLeaseTimeout, conf.CommitTimeout = 50*time.Millisecond, 5*time.Millisecond
	logs, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	addr, trans := raft.NewInmemTransport("")
	if err := raft.BootstrapCluster(conf, logs, logs, snaps, trans, raft.Configuration{
		Servers: []raft.Server{{ID: conf.LocalID, Address: addr}},
	}); err != nil {
		t.Fatal(err)
	}
	r, err := raft.NewRaft(conf, fsm, logs, logs, snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leadership", func() bool { return r.State() == raft.Leader })

	// The FSM blocks in its first entry; the later ones are committed one
	// by one and queue up behind it.
	const n = 64
	futures := make([]raft.ApplyFuture, n)
	for i := range futures {
		futures[i] = r.Apply([]byte("entry"), time.Second)
	}
	last := r.LastIndex()
	waitFor(t, "every entry committed, the FSM blocked", func() bool {
		c, _ := strconv.ParseUint(r.Stats()["commit_index"], 10, 64)
		return fsm.entered.Load() && c >= last
	})

	shut := make(chan error, 1)
	go func() { shut <- r.Shutdown().Error() }()
	waitFor(t, "shutdown under way", func() bool { return r.State() == raft.Shutdown })
	close(fsm.gate)
	if err := <-shut; err != nil {
		t.Fatalf("shutdown: %v", err)
	}

	ended := make(chan int, 1)
	go func() {
		shutdownErrs := 0
		for _, f := range futures {
			if errors.Is(f.Error(), raft.ErrRaftShutdown) {
				shutdownErrs++
			}
		}
		ended <- shutdownErrs
	}()
	select {
	case k := <-ended:
		t.Logf("%d of %d futures ended with ErrRaftShutdown, the rest applied", k, n)
	case <-time.After(30 * time.Second):
		t.Fatal("a future of an Apply still waits 30 s after raft shut down")
	}
}
