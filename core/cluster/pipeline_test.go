package cluster_test

import (
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// rejectingLogs is a raft log that fails the next stores it is told to,
// so its member answers an AppendEntries with Success=false.
type rejectingLogs struct {
	*raft.InmemStore
	fail atomic.Int32
}

var errRejected = errors.New("rejected on purpose")

func (l *rejectingLogs) StoreLog(e *raft.Log) error { return l.StoreLogs([]*raft.Log{e}) }

func (l *rejectingLogs) StoreLogs(es []*raft.Log) error {
	if l.fail.Add(-1) >= 0 {
		return errRejected
	}
	return l.InmemStore.StoreLogs(es)
}

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("no snapshots") }
func (nopFSM) Restore(io.ReadCloser) error         { return nil }

// TestPipelineSurvivesRejectedAppends: a follower that answers a pipelined
// AppendEntries with Success=false keeps being replicated to. Upstream,
// the pipeline's decoder stops reading when it sees the rejection, and a
// send the leader makes before it notices (it picks among ready cases at
// random) waits forever for that decoder, as the pipeline is closed only
// after the send loop: replication to the follower stops for good while
// heartbeats go on (hashicorp/raft#612), and the leader's shutdown waits
// for it. The transport's default of two RPCs in flight leaves the
// pipeline no buffer, so half of the rejections under load stopped it.
func TestPipelineSurvivesRejectedAppends(t *testing.T) {
	trans := make([]*raft.NetworkTransport, 2)
	for i := range trans {
		tr, err := raft.NewTCPTransportWithLogger("127.0.0.1:0", nil, 3, 5*time.Second, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		trans[i] = tr
	}
	servers := []raft.Server{
		{ID: "leader", Address: trans[0].LocalAddr()},
		{ID: "follower", Address: trans[1].LocalAddr()},
	}
	follower := &rejectingLogs{InmemStore: raft.NewInmemStore()}
	rafts := make([]*raft.Raft, 2)
	for i, id := range []raft.ServerID{"leader", "follower"} {
		conf := raft.DefaultConfig()
		conf.LocalID = id
		conf.Logger = hclog.NewNullLogger()
		conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
		conf.CommitTimeout = 5 * time.Millisecond
		var logs raft.LogStore = raft.NewInmemStore()
		if id == "follower" {
			logs = follower
			// It never stands for election: the leader is "leader".
			conf.HeartbeatTimeout, conf.ElectionTimeout, conf.LeaderLeaseTimeout = time.Hour, time.Hour, time.Hour
		}
		stable, snaps := raft.NewInmemStore(), raft.NewInmemSnapshotStore()
		if err := raft.BootstrapCluster(conf, logs, stable, snaps, trans[i], raft.Configuration{Servers: servers}); err != nil {
			t.Fatal(err)
		}
		r, err := raft.NewRaft(conf, nopFSM{}, logs, stable, snaps, trans[i])
		if err != nil {
			t.Fatal(err)
		}
		rafts[i] = r
	}
	t.Cleanup(func() {
		for i, r := range rafts {
			done := make(chan error, 1)
			go func() { done <- r.Shutdown().Error() }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Errorf("raft %d did not shut down in 10 s", i)
			}
			trans[i].Close()
		}
	})
	leader := rafts[0]
	deadline := time.Now().Add(10 * time.Second)
	for leader.State() != raft.Leader {
		if time.Now().After(deadline) {
			t.Fatal("no leader")
		}
		time.Sleep(5 * time.Millisecond)
	}

	// Appends keep the leader's replicator busy, so a send is ready
	// whenever the pipeline's decoder stops.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			// Many in flight at once, so sends queue behind each other.
			fs := make([]raft.ApplyFuture, 16)
			for i := range fs {
				fs[i] = leader.Apply([]byte("x"), time.Second)
			}
			for _, f := range fs {
				f.Error()
			}
		}
	}()
	for round := range 30 {
		follower.fail.Store(1)
		want := leader.LastIndex()
		deadline := time.Now().Add(5 * time.Second)
		for follower.fail.Load() >= 0 || rafts[1].LastIndex() < want {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the follower holds index %d, the leader %d, 5 s after a rejected append: replication to it stopped",
					round, rafts[1].LastIndex(), leader.LastIndex())
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
}
