package main

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// The raft network of a partitioned set runs through the test.
//
// A member listens for raft on its own entry in --peers, and dials the
// others at theirs. Each member therefore gets a peer list of its own:
// its own entry is its real raft address, and the entry of every other
// member B is a proxy in the test process that only this member dials,
// forwarding to B's real address. With a proxy per directed pair (A
// dials B through proxy A→B) the test knows who sent every byte and can
// drop one direction of one pair, which one proxy per member could only
// do if the proxy could tell the dialers apart; the members all dial
// from 127.0.0.1.
//
// The members then bootstrap with configurations that agree on every
// server's id and suffrage, which is what raft's quorums are counted
// from, and differ only in the addresses, which raft uses for dialing
// alone: each member's bootstrap entry is its own address book. The
// address a member puts in its RPC headers is its real listen address
// (the stream layer's), which the others use to name the leader and the
// candidate they voted for, and compare only with each other. A
// snapshot installed from
// the leader would carry the leader's address book (and so bypass the
// proxies); the set here never installs one, its raft log keeping the
// last ten minutes.
//
// A cut direction holds the bytes it has read: they pass when the cut
// heals, as TCP's retransmissions would deliver them after a real
// partition, and the proxy stops reading, so the sender's socket buffer
// fills and its writes block until raft's timeouts give up on the
// connection. Connections dialed during a cut are accepted and held the
// same way.

// cutGate passes or holds one direction of a link's bytes.
type cutGate struct {
	mu   sync.Mutex
	pass bool
	wake chan struct{} // closed while pass
}

func newCutGate() *cutGate {
	g := &cutGate{pass: true, wake: make(chan struct{})}
	close(g.wake)
	return g
}

func (g *cutGate) set(pass bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if pass == g.pass {
		return
	}
	g.pass = pass
	if pass {
		close(g.wake)
	} else {
		g.wake = make(chan struct{})
	}
}

// wait returns true once bytes may pass, false if done closes first.
func (g *cutGate) wait(done <-chan struct{}) bool {
	g.mu.Lock()
	w := g.wake
	g.mu.Unlock()
	select {
	case <-w:
		return true
	case <-done:
		return false
	}
}

// raftLink is the proxy member from dials member to through.
type raftLink struct {
	ln     net.Listener
	target string
	fwd    *cutGate // bytes from the dialer (from) to to
	back   *cutGate // bytes from to back to the dialer
	mu     struct {
		sync.Mutex
		conns map[net.Conn]bool
	}
	wg sync.WaitGroup
}

func newRaftLink(t *testing.T, target string) *raftLink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &raftLink{ln: ln, target: target, fwd: newCutGate(), back: newCutGate()}
	l.mu.conns = map[net.Conn]bool{}
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.close)
	return l
}

func (l *raftLink) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.wg.Add(1)
		go l.serve(c)
	}
}

// track records c for close; false once the link is closed.
func (l *raftLink) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.conns == nil {
		return false
	}
	l.mu.conns[c] = true
	return true
}

func (l *raftLink) untrack(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.mu.conns, c)
}

func (l *raftLink) serve(in net.Conn) {
	defer l.wg.Done()
	if !l.track(in) {
		in.Close()
		return
	}
	defer l.untrack(in)
	out, err := net.DialTimeout("tcp", l.target, 5*time.Second)
	if err != nil {
		in.Close() // the member is down: the dialer sees a refused peer
		return
	}
	if !l.track(out) {
		in.Close()
		out.Close()
		return
	}
	defer l.untrack(out)
	done := make(chan struct{})
	var once sync.Once
	stop := func() {
		once.Do(func() {
			close(done)
			in.Close()
			out.Close()
		})
	}
	var pipes sync.WaitGroup
	pipes.Add(2)
	go func() { defer pipes.Done(); copyThrough(out, in, l.fwd, done, stop) }()
	go func() { defer pipes.Done(); copyThrough(in, out, l.back, done, stop) }()
	pipes.Wait()
}

// copyThrough copies src to dst while g passes; a chunk read before a cut is
// held until it heals.
func copyThrough(dst, src net.Conn, g *cutGate, done <-chan struct{}, stop func()) {
	defer stop()
	buf := make([]byte, 64<<10)
	for {
		if !g.wait(done) {
			return
		}
		n, err := src.Read(buf)
		if n > 0 {
			if !g.wait(done) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *raftLink) close() {
	l.ln.Close()
	l.mu.Lock()
	for c := range l.mu.conns {
		c.Close()
	}
	l.mu.conns = nil
	l.mu.Unlock()
	// Held pipes wait on their gates: open them so they see the close.
	l.fwd.set(true)
	l.back.set(true)
	l.wg.Wait()
}

// raftNet is the raft network of a set: links[a][b] is the proxy member
// a dials member b through.
type raftNet struct {
	links [][]*raftLink
}

// drop holds (or, with drop false, passes) the raft bytes member from
// sends to member to: its requests on the connections it dials, and its
// responses on the connections to dials.
func (n *raftNet) drop(from, to int, drop bool) {
	n.links[from][to].fwd.set(!drop)
	n.links[to][from].back.set(!drop)
}

// partitionedSet starts a set of n members whose raft traffic runs
// through a raftNet.
func partitionedSet(t *testing.T, name string, n int, namesrv string) (*replicatedSet, *raftNet) {
	t.Helper()
	rs := &replicatedSet{t: t, name: name}
	t.Cleanup(func() {
		if k := rs.races.Load(); k > 0 {
			t.Errorf("members of %s reported %d data races (run with RMQ_TEST_CHILD_LOGS=1 to see them)", name, k)
		}
	})
	for attempt := 1; ; attempt++ {
		rs.members = nil
		for i := range n {
			rs.members = append(rs.members, newMember(t, fmt.Sprintf("%s-%d", name, i)))
		}
		rn := &raftNet{links: make([][]*raftLink, n)}
		for a := range n {
			rn.links[a] = make([]*raftLink, n)
			for b := range n {
				if a != b {
					rn.links[a][b] = newRaftLink(t, rs.members[b].raftAddr)
				}
			}
		}
		var err error
		for a, m := range rs.members {
			var peers []string
			for b, o := range rs.members {
				addr := o.raftAddr
				if a != b {
					addr = rn.links[a][b].ln.Addr().String()
				}
				peers = append(peers, o.id+"="+addr)
			}
			m.args = []string{"--set-name", name, "--node-id", m.id, "--peers", strings.Join(peers, ","),
				"--data-dir", m.dataDir, "--listen", m.listen, "--namesrv-listen", "", "--grpc-listen", "",
				"--namesrv", namesrv, "--http-listen", "127.0.0.1:0", "--log-level", "info"}
			if err = rs.startMember(m); err != nil {
				break
			}
		}
		if err == nil {
			return rs, rn
		}
		for _, m := range rs.members {
			if m.cmd != nil {
				rs.kill(m, syscall.SIGKILL)
			}
		}
		if attempt == 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("starting %s again on other ports: %v", name, err)
	}
}

// raftLeaderLease is raft's LeaderLeaseTimeout as the members run it (the
// default; core/cluster.Options): a leader that has heard from no
// majority for this long steps down, failing every proposal it has not
// committed.
const raftLeaderLease = 500 * time.Millisecond

// partitionAck is a send the set acknowledged.
type partitionAck struct {
	body string
	at   time.Time      // when SendSync returned it
	host netip.AddrPort // the member that stored it (its offsetMsgId)
}

// TestReplicatedSetPartitions cuts a set's leader off from the other two
// members while the official client sends synchronously from several
// goroutines: both directions, only its outgoing raft traffic, and only
// its incoming. In each case:
//
//   - the old leader acknowledges nothing later than raftLeaderLease after
//     the cut. An entry commits only on answers from a majority, and
//     after the cut none reach the old leader: what it acknowledges after
//     the cut was committed on answers it had before, and it acknowledges
//     an entry as soon as it applies it. Raft steps it down, failing what
//     it has not committed, once no majority answered for the lease: at
//     most raftLeaderLease after the cut. An acknowledgement later than
//     that would be of an entry committed without a majority, or one that
//     spent more than the lease between its commit and the client on
//     loopback;
//   - the other two elect a leader, and the client's sends are
//     acknowledged by it within partitionFailoverBound of the cut: an
//     election timeout, the new master's registration, and the client's
//     next route refresh (every 30 s, not configurable);
//   - after the cut heals, the old leader follows the new one, and every
//     acknowledged message is stored once on every member.
//
// RMQ_LONG_FAULTS=1 cuts each way three times, on a fresh set each.
func TestReplicatedSetPartitions(t *testing.T) {
	waitingTest(t)
	rounds := 1
	if os.Getenv("RMQ_LONG_FAULTS") != "" {
		rounds = 3
	}
	cases := []struct {
		name string
		cut  func(rn *raftNet, leader, other int, drop bool)
	}{
		{"symmetric", func(rn *raftNet, l, o int, drop bool) { rn.drop(l, o, drop); rn.drop(o, l, drop) }},
		{"leader-cannot-send", func(rn *raftNet, l, o int, drop bool) { rn.drop(l, o, drop) }},
		{"leader-cannot-receive", func(rn *raftNet, l, o int, drop bool) { rn.drop(o, l, drop) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			waitingTest(t)
			for r := range rounds {
				partitionLeader(t, fmt.Sprintf("part%d", r), c.cut)
			}
		})
	}
}

// partitionFailoverBound is how soon after the cut the majority must
// acknowledge a send.
const partitionFailoverBound = 45 * time.Second

func partitionLeader(t *testing.T, name string, cut func(rn *raftNet, leader, other int, drop bool)) {
	ns := startNamesrv(t)
	rs, rn := partitionedSet(t, name, 3, ns.NamesrvAddr)
	topic := brokertest.Name("Partition")
	createSetTopic(t, rs, ns.NamesrvAddr, topic)
	old := rs.leader()
	st, _ := old.status()
	oldHost, err := netip.ParseAddrPort(st.Serving)
	if err != nil {
		t.Fatalf("the leader serves at %q: %v", st.Serving, err)
	}
	li := 0
	for i, m := range rs.members {
		if m == old {
			li = i
		}
	}

	p := startSetProducer(t, ns.NamesrvAddr, name, 0, 3*time.Second) // a retry could store a message twice
	var (
		mu    sync.Mutex
		acks  []partitionAck
		stop  = make(chan struct{})
		wg    sync.WaitGroup
		sends atomic.Int64
	)
	count := func(ok func(a partitionAck) bool) int {
		mu.Lock()
		defer mu.Unlock()
		k := 0
		for _, a := range acks {
			if ok(a) {
				k++
			}
		}
		return k
	}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				body := fmt.Sprintf("%s-w%d-%d", name, w, i)
				sends.Add(1)
				res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)))
				if err != nil || res.Status != primitive.SendOK {
					// A refusing replica answers at once: pace the
					// retries rather than spin on it.
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
					continue
				}
				at := time.Now()
				host, _, err := message.ParseOffsetMsgID(res.OffsetMsgID)
				if err != nil {
					t.Errorf("acknowledged %s with offsetMsgId %q: %v", body, res.OffsetMsgID, err)
				}
				mu.Lock()
				acks = append(acks, partitionAck{body: body, at: at, host: host})
				mu.Unlock()
			}
		}()
	}
	finish := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
		p.Shutdown()
	})
	defer finish()
	brokertest.Eventually(t, 30*time.Second, "sends acknowledged by the leader", func() bool {
		return count(func(a partitionAck) bool { return a.host == oldHost }) >= 100
	})

	for o := range rs.members {
		if o != li {
			cut(rn, li, o, true)
		}
	}
	cutAt := time.Now()
	// The old leader's own view: it steps down once no majority answered
	// for raftLeaderLease. The bound leaves room for polling /cluster on a
	// loaded machine; the acknowledgement times below are the precise
	// check.
	var steppedDown time.Duration
	brokertest.Eventually(t, 5*time.Second, "the cut-off leader stepping down", func() bool {
		v, ok := old.status()
		steppedDown = time.Since(cutAt)
		return ok && v.State != "Leader"
	})
	if steppedDown > raftLeaderLease+1500*time.Millisecond {
		t.Errorf("the cut-off leader stepped down %v after the cut", steppedDown)
	}
	var elected time.Duration
	var newLeader *setMember
	brokertest.Eventually(t, partitionFailoverBound, "the majority's leader serving", func() bool {
		for _, m := range rs.members {
			if st, ok := m.status(); ok && m != old && st.State == "Leader" && st.Serving != "" {
				elected, newLeader = time.Since(cutAt), m
				return true
			}
		}
		return false
	})
	brokertest.Eventually(t, partitionFailoverBound, "a send acknowledged by the majority", func() bool {
		return count(func(a partitionAck) bool { return a.at.After(cutAt) && a.host != oldHost }) > 0
	})
	st, _ = old.status()
	if st.State == "Leader" {
		t.Errorf("the cut-off leader still leads %v after the cut", time.Since(cutAt))
	}
	brokertest.Eventually(t, 30*time.Second, "more sends acknowledged by the majority", func() bool {
		return count(func(a partitionAck) bool { return a.at.After(cutAt) && a.host != oldHost }) >= 50
	})

	for o := range rs.members {
		if o != li {
			cut(rn, li, o, false)
		}
	}
	healAt := time.Now()
	// Rejoined: the old leader follows the majority's leader and has
	// caught up with what it had committed at the heal.
	lv, ok := newLeader.status()
	if !ok {
		t.Fatalf("%s does not answer", newLeader.id)
	}
	brokertest.Eventually(t, 30*time.Second, "the old leader following", func() bool {
		v, ok := old.status()
		return ok && v.State == "Follower" && v.Leader != "" && v.Leader != old.id && v.AppliedIndex >= lv.CommitIndex
	})
	rejoin := time.Since(healAt)
	if l := rs.leader(); l == old {
		t.Errorf("the old leader leads again after the heal")
	}
	brokertest.Eventually(t, 30*time.Second, "sends acknowledged after the heal", func() bool {
		return count(func(a partitionAck) bool { return a.at.After(healAt) }) >= 50
	})
	finish()

	var firstMajority, lastOld time.Duration = -1, -time.Hour
	lateOld := 0
	for _, a := range acks {
		d := a.at.Sub(cutAt)
		if a.host == oldHost {
			lastOld = max(lastOld, d)
			if d > raftLeaderLease {
				lateOld++
			}
		} else if d > 0 && (firstMajority < 0 || d < firstMajority) {
			firstMajority = d
		}
	}
	if lateOld > 0 {
		t.Errorf("the cut-off leader acknowledged %d sends more than %v after the cut (the last %v after)", lateOld, raftLeaderLease, lastOld)
	}
	if firstMajority < 0 || firstMajority > partitionFailoverBound {
		t.Errorf("the majority first acknowledged a send %v after the cut, want within %v", firstMajority, partitionFailoverBound)
	}

	// The members' address books are their own only while none installs
	// a snapshot from the leader (see raftLink).
	for _, m := range rs.members {
		if v, ok := m.status(); !ok || v.SnapshotsInstalled != 0 {
			t.Errorf("%s installed %d snapshots (answering: %v)", m.id, v.SnapshotsInstalled, ok)
		}
	}
	got := rs.storedBodies(topic)
	for _, a := range acks {
		if got[a.body] != 1 {
			t.Errorf("acknowledged %s is stored %d times on the members", a.body, got[a.body])
		}
	}
	for body, k := range got {
		if k != 1 {
			t.Errorf("%s is stored %d times", body, k)
		}
	}
	t.Logf("%d sends, %d acknowledged, %d stored on every member; after the cut: the old leader's last ack %v, "+
		"it stepped down by %v, the majority's leader serving %v, its first ack %v; the old leader followed it %v after the heal",
		sends.Load(), len(acks), len(got), lastOld.Round(time.Millisecond), steppedDown.Round(time.Millisecond), elected.Round(time.Millisecond),
		firstMajority.Round(time.Millisecond), rejoin.Round(time.Millisecond))
}
