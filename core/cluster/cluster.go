package cluster

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/rmq-go/rmq/core/store"
)

// Peer is one member of a broker set.
type Peer struct {
	ID   string `yaml:"id"`   // the member's node id
	Addr string `yaml:"addr"` // its raft address, host:port
}

// ParsePeers reads "id=host:port,id=host:port,...".
func ParsePeers(s string) ([]Peer, error) {
	var peers []Peer
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("cluster: peer %q: want id=host:port", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("cluster: peer %q: %v", part, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("cluster: peer id %q named twice", id)
		}
		seen[id] = true
		peers = append(peers, Peer{ID: id, Addr: addr})
	}
	return peers, nil
}

// Options configure a Node. Zero values mean the documented default.
type Options struct {
	// SetName names the broker set (the brokerName of its routes).
	// Required.
	SetName string `yaml:"setName"`
	// NodeID is this member's id, one of Peers. Required.
	NodeID string `yaml:"nodeId"`
	// Peers are every member of the set, this one included: an odd
	// number, three or more for a set that survives a failure. Members
	// bootstrap the set from this list the first time they start; later
	// starts use the membership stored in the raft log.
	Peers []Peer `yaml:"peers"`
	// Join makes a member that starts with no raft state wait to be added
	// to a running set (Node.AddMember on its leader) instead of
	// bootstrapping one from Peers. Members bootstrapped together leave it
	// false; a member added later, or one replacing a member whose disk
	// was lost, sets it: bootstrapping would give it a log of its own
	// that could pass for the set's.
	Join bool `yaml:"join"`
	// Recover rewrites the member's raft membership to Peers before it
	// starts, for a set that lost its majority for good: every surviving
	// member is started once with it and the same Peers (the survivors),
	// and they form the set anew. What only the lost members held is
	// lost. It is a deliberate step, never a default.
	Recover bool `yaml:"-"`
	// Dir holds the raft log and snapshots. Required.
	Dir string `yaml:"-"`
	// Store configures the member's store; Replicator is set here.
	Store store.Options `yaml:"-"`
	// HeartbeatTimeout and ElectionTimeout are raft's; default 1 s each.
	// LeaderLeaseTimeout (default 500 ms) is how long a leader keeps
	// serving without hearing from a majority.
	HeartbeatTimeout   time.Duration `yaml:"heartbeatTimeout"`
	ElectionTimeout    time.Duration `yaml:"electionTimeout"`
	LeaderLeaseTimeout time.Duration `yaml:"leaderLeaseTimeout"`
	// SnapshotThreshold is how many entries the raft log holds past the
	// last snapshot before the next one (default 1024); TrailingLogs how
	// many a snapshot leaves in it for members a little behind (default
	// 1024). SnapshotInterval is how often the threshold is checked
	// (default 2 min). An entry is a group-commit round; a snapshot costs
	// an fsync and the index values, not a copy of the log.
	SnapshotThreshold uint64        `yaml:"snapshotThreshold"`
	TrailingLogs      uint64        `yaml:"trailingLogs"`
	SnapshotInterval  time.Duration `yaml:"snapshotInterval"`
	// TrailingDuration and TrailingBytes are how much of the raft log a
	// snapshot leaves besides TrailingLogs: the entries of the last
	// TrailingDuration (default 6 h) and every older one whose round the
	// commit log still holds, as far back as they take at most
	// TrailingBytes of disk (default 16 GiB). A round's entry is a pointer
	// into the commit log of a few dozen bytes, so the raft log is a small
	// fraction of the commit log it covers. A member stopped or cut off
	// catches up from the log as long as the leader's commit log holds
	// what it missed; one away longer installs a snapshot, which copies
	// the leader's whole commit log. A negative TrailingDuration keeps
	// only TrailingLogs.
	TrailingDuration time.Duration `yaml:"trailingDuration"`
	TrailingBytes    int64         `yaml:"trailingBytes" cfg:"size"`
	// StreamLayer carries raft's traffic; nil listens on this member's
	// peer address with TCP (ListenTCP), with TLS when TLS and DialTLS
	// are set, and serves members of this set only.
	StreamLayer raft.StreamLayer `yaml:"-"`
	// TLS is the raft port's server config (requiring and verifying
	// client certificates), DialTLS the config members dial each other
	// with (presenting theirs).
	TLS     *tls.Config `yaml:"-"`
	DialTLS *tls.Config `yaml:"-"`
	// OnLeader is called when this member becomes the set's writable
	// leader, OnFollower when it stops being one. They run on the node's
	// own goroutine, one at a time, in order.
	OnLeader   func() `yaml:"-"`
	OnFollower func() `yaml:"-"`
	// OnRestore is called, on raft's goroutine, after a snapshot from the
	// leader replaced this member's store (Store returns the new one).
	OnRestore func() `yaml:"-"`
	// OnFail is called once, on a goroutine of its own, after this
	// member's store failed and the member left the set (Failed): it
	// takes part again only once reopened.
	OnFail func(error) `yaml:"-"`
	// Logger receives the node's and raft's logs.
	Logger *slog.Logger `yaml:"-"`
}

// Defaults of Options.TrailingDuration and TrailingBytes.
const (
	DefaultTrailingDuration = 6 * time.Hour
	DefaultTrailingBytes    = 16 << 30
)

// Node is a member of a replicated broker set.
type Node struct {
	opts     Options
	log      *slog.Logger
	self     Peer
	store    atomic.Pointer[store.Store]
	raft     *raft.Raft
	trans    *raft.NetworkTransport
	logs     *logStore
	snaps    snapshotStore
	notify   chan bool
	hbeat    time.Duration // raft's heartbeat timeout
	recheck  chan struct{}
	waits    chan pending
	quit     chan struct{}
	wg       sync.WaitGroup
	leading  atomic.Bool             // this member is the writable leader
	failure  atomic.Pointer[failure] // why the member left its set (failWith); nil while it takes part
	restores atomic.Int64            // snapshots installed from the leader
	received atomic.Int64            // bytes read from connections to the raft port
	// storeClosed is set while Restore has closed the store and not yet
	// opened the restored one (for good, if that failed).
	storeClosed atomic.Bool
	// raftDown is set as raft is shut down. raft's own state can read
	// Follower or Candidate after its Shutdown: its run loop may handle one
	// more RPC or timeout, which sets the state, before it sees the
	// shutdown.
	raftDown atomic.Bool
	closing  sync.Once
	opened   chan struct{} // closed when Open returns, n.raft set or not
}

type pending struct {
	f    raft.ApplyFuture
	done func(error)
}

// Open opens the member's store and raft state and joins the set. The
// store takes writes only while this member leads (OnLeader).
func Open(opts Options) (*Node, error) {
	if opts.SetName == "" || opts.NodeID == "" || opts.Dir == "" {
		return nil, errors.New("cluster: set name, node id and directory are required")
	}
	n := &Node{opts: opts, notify: make(chan bool, 16), recheck: make(chan struct{}, 1),
		waits: make(chan pending, 4096), quit: make(chan struct{}), opened: make(chan struct{})}
	// raft may apply or restore, and so fail the member, before NewRaft
	// returns: leave waits for this.
	defer close(n.opened)
	if n.opts.Logger == nil {
		n.opts.Logger = slog.Default()
	}
	n.log = n.opts.Logger.With("component", "cluster", "set", opts.SetName, "node", opts.NodeID)
	for _, p := range opts.Peers {
		if p.ID == opts.NodeID {
			n.self = p
		}
	}
	if n.self.ID == "" {
		return nil, fmt.Errorf("cluster: node %q is not among the peers", opts.NodeID)
	}
	if len(opts.Peers)%2 == 0 {
		n.log.Warn("an even number of members tolerates no more failures than one fewer", "members", len(opts.Peers))
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, err
	}
	var err error
	keep := retention{age: opts.TrailingDuration, bytes: opts.TrailingBytes}
	if keep.age == 0 {
		keep.age = DefaultTrailingDuration
	}
	if keep.bytes <= 0 {
		keep.bytes = DefaultTrailingBytes
	}
	hlog := hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Info, Output: slogWriter{n.log}})
	n.logs, err = openLogStore(opts.Dir, keep, 0, hlog)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			n.closeFiles()
		}
	}()
	files, err := raft.NewFileSnapshotStoreWithLogger(opts.Dir, 2, hlog)
	if err != nil {
		return nil, fmt.Errorf("cluster: snapshots: %w", err)
	}
	n.snaps = snapshotStore{files, n}
	so := opts.Store
	so.Replicator = n
	so.WriteAhead = true
	if err := n.finishInstall(files, so); err != nil {
		return nil, err
	}
	st, err := store.Open(so)
	if err != nil {
		return nil, err
	}
	n.store.Store(st)
	n.logs.rounds = n.Store
	n.logs.failed = n.failWith
	if err := n.reconcile(files); err != nil {
		st.Close()
		return nil, err
	}

	layer := opts.StreamLayer
	if layer == nil {
		layer, err = ListenTCP(n.self.Addr, TCPLayer{Set: opts.SetName, Server: opts.TLS, Client: opts.DialTLS, Logger: n.log})
		if err != nil {
			st.Close()
			return nil, err
		}
	}
	layer = receivedLayer{layer, &n.received}
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{Stream: layer, MaxPool: 3, Timeout: 10 * time.Second, Logger: hlog})

	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(opts.NodeID)
	conf.Logger = hlog
	conf.NotifyCh = n.notify
	conf.NoSnapshotRestoreOnStart = true // the store is on disk already
	if opts.HeartbeatTimeout > 0 {
		conf.HeartbeatTimeout = opts.HeartbeatTimeout
	}
	n.hbeat = conf.HeartbeatTimeout
	if opts.ElectionTimeout > 0 {
		conf.ElectionTimeout = opts.ElectionTimeout
	}
	if opts.LeaderLeaseTimeout > 0 {
		conf.LeaderLeaseTimeout = opts.LeaderLeaseTimeout
	}
	if opts.SnapshotInterval > 0 {
		conf.SnapshotInterval = opts.SnapshotInterval
	}
	conf.MaxAppendEntries = 256
	conf.SnapshotThreshold, conf.TrailingLogs = 1024, 1024
	if opts.SnapshotThreshold > 0 {
		conf.SnapshotThreshold = opts.SnapshotThreshold
	}
	if opts.TrailingLogs > 0 {
		conf.TrailingLogs = opts.TrailingLogs
	}
	has, err := raft.HasExistingState(n.logs, n.logs, n.snaps)
	if err != nil {
		st.Close()
		return nil, err
	}
	if !has && opts.Join {
		n.log.Info("no raft state: waiting to be added to the set by its leader")
	}
	if !has && !opts.Join {
		var cfg raft.Configuration
		for _, p := range opts.Peers {
			cfg.Servers = append(cfg.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
		if err := raft.BootstrapCluster(conf, n.logs, n.logs, n.snaps, n.trans, cfg); err != nil {
			st.Close()
			return nil, fmt.Errorf("cluster: bootstrap: %w", err)
		}
	}
	if has && opts.Recover {
		if err := n.recoverMembership(conf, files); err != nil {
			st.Close()
			return nil, err
		}
	}
	n.raft, err = raft.NewRaft(conf, (*fsm)(n), n.logs, n.logs, n.snaps, n.trans)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("cluster: start raft: %w", err)
	}
	ok = true
	n.wg.Add(2)
	go n.waitLoop()
	go n.leaderLoop()
	return n, nil
}

// Store returns the member's store. A snapshot installed from the leader
// replaces it, so callers ask again after OnLeader.
func (n *Node) Store() *store.Store { return n.store.Load() }

// Leading reports whether this member is the set's writable leader.
func (n *Node) Leading() bool { return n.leading.Load() && n.failure.Load() == nil }

// Propose implements store.Replicator. It waits for room in raft's
// pipeline rather than giving up after a while: a round that timed out
// there while the next one entered the log would leave a gap no member
// could apply. The store bounds the rounds in flight instead.
func (n *Node) Propose(entry []byte, done func(error)) {
	f := n.raft.Apply(entry, 0)
	select {
	case n.waits <- pending{f, done}:
	case <-n.quit:
		done(raft.ErrRaftShutdown)
	}
}

// waitLoop reports each proposal's outcome, in proposal order.
func (n *Node) waitLoop() {
	defer n.wg.Done()
	for {
		select {
		case p := <-n.waits:
			err := p.f.Error()
			if err == nil {
				if e, ok := p.f.Response().(error); ok {
					err = e
				}
			}
			p.done(err)
			if err != nil {
				select {
				case n.recheck <- struct{}{}:
				default:
				}
			}
		case <-n.quit:
			for {
				select {
				case p := <-n.waits:
					p.done(raft.ErrRaftShutdown)
				default:
					return
				}
			}
		}
	}
}

// leaderLoop follows raft's leadership: a new leader applies everything
// committed before it (a barrier) before its store takes writes.
func (n *Node) leaderLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-n.quit:
			return
		case <-n.notify:
		case <-n.recheck:
		case <-tick.C:
			if err := n.Store().Failed(); err != nil {
				n.failWith(err)
			}
		}
		n.settle()
	}
}

// settle makes the store's writability and the callbacks agree with
// raft's state.
func (n *Node) settle() {
	st := n.Store()
	isLeader := n.state() == raft.Leader && n.failure.Load() == nil
	switch {
	case isLeader && !st.Writable():
		if err := n.raft.Barrier(10 * time.Second).Error(); err != nil {
			n.log.Warn("leader could not apply the committed log yet", "err", err)
			select {
			case n.recheck <- struct{}{}:
			default:
			}
			return
		}
		if n.state() != raft.Leader || n.failure.Load() != nil {
			return
		}
		st.Promote()
		n.log.Info("leading the set", "applied", n.raft.AppliedIndex())
		if !n.leading.Swap(true) && n.opts.OnLeader != nil {
			n.opts.OnLeader()
		}
	case !isLeader:
		if st.Writable() {
			st.Demote(errors.New("leadership lost"))
		}
		if n.leading.Swap(false) {
			n.log.Info("following", "leader", n.LeaderID())
			if n.opts.OnFollower != nil {
				n.opts.OnFollower()
			}
		}
	}
}

// StepDown hands leadership to another member, if this one leads.
func (n *Node) StepDown() {
	if err := n.raft.LeadershipTransfer().Error(); err != nil {
		n.log.Warn("leadership transfer", "err", err)
	}
}

// LeaderID returns the current leader's node id, or "" when none is known.
func (n *Node) LeaderID() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}

// LeaderContact returns the set's leader as this member knows it, and
// whether that is current: this member leads, or heard from the leader
// within raft's heartbeat timeout (a leader sends heartbeats ten times as
// often, so a live leader misses that only when something is badly wrong;
// half of it proved too little on a loaded machine, where replicas
// refused route queries with their leader alive). A leader that died
// stops being current here as the others start to elect another, so a
// member stops naming it to clients before the election ends.
func (n *Node) LeaderContact() (id string, current bool) {
	id = n.LeaderID()
	if id == "" {
		return "", false
	}
	if n.state() == raft.Leader {
		return id, true
	}
	t := n.raft.LastContact()
	return id, !t.IsZero() && time.Since(t) < n.hbeat
}

// Close leaves the set: raft stops, then the store closes. A leader
// stops leading first.
func (n *Node) Close() error {
	var errs []error
	n.closing.Do(func() {
		if n.leading.Swap(false) && n.opts.OnFollower != nil {
			n.opts.OnFollower()
		}
		n.raftDown.Store(true)
		errs = append(errs, n.raft.Shutdown().Error())
		close(n.quit)
		n.wg.Wait()
		errs = append(errs, n.trans.Close())
		if !n.storeClosed.Load() {
			errs = append(errs, n.Store().Close())
		}
		errs = append(errs, n.closeFiles())
	})
	return errors.Join(errs...)
}

func (n *Node) closeFiles() error {
	if n.logs != nil {
		return n.logs.Close()
	}
	return nil
}

// slogWriter hands raft's log lines to slog.
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	switch {
	case strings.Contains(line, "[ERROR]"):
		w.log.Error(line)
	case strings.Contains(line, "[WARN]"):
		w.log.Warn(line)
	default:
		w.log.Debug(line)
	}
	return len(p), nil
}

var _ io.Writer = slogWriter{}

// failure is why a member left its set.
type failure struct{ err error }

// Failed returns why this member stopped taking part in its set (its
// store failed to apply a committed entry, or failed on its own), or nil
// while it takes part.
func (n *Node) Failed() error {
	if f := n.failure.Load(); f != nil {
		return f.err
	}
	return nil
}

// failWith takes the member out of its set after its store failed: the
// store no longer holds what the set's log says, so it must neither
// apply, vote, lead, nor snapshot until restarted. raft is shut down
// (a leader first hands leadership over); reopening the member recovers
// the store to its durable state and raft replays the log from there.
func (n *Node) failWith(cause error) {
	if !n.failure.CompareAndSwap(nil, &failure{cause}) {
		return
	}
	n.log.Error("this member's store failed: it leaves the set until restarted", "err", cause)
	if !n.storeClosed.Load() {
		n.Store().Demote(cause)
	}
	select {
	case n.recheck <- struct{}{}:
	default:
	}
	n.wg.Add(1)
	go n.leave()
}

// state is raft's state, Shutdown once this member has shut raft down.
func (n *Node) state() raft.RaftState {
	if n.raftDown.Load() {
		return raft.Shutdown
	}
	return n.raft.State()
}

// leave shuts raft down on a failed member.
func (n *Node) leave() {
	defer n.wg.Done()
	<-n.opened
	if n.raft == nil {
		return // Open failed: nothing runs
	}
	if n.state() == raft.Leader {
		// The raft log here is sound; only the store is not. Handing
		// leadership over spares the others an election timeout.
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			n.log.Warn("failed member could not hand leadership over", "err", err)
		}
	}
	n.raftDown.Store(true)
	if err := n.raft.Shutdown().Error(); err != nil {
		n.log.Warn("shutting raft down", "err", err)
	}
	// Peers then find the port closed at once instead of waiting out a
	// request no one answers.
	n.trans.Close()
	if n.opts.OnFail != nil {
		n.opts.OnFail(n.Failed())
	}
}
