package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/client"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/namesrv"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/brokertest"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
	"github.com/rmq-go/rmq/internal/server"
)

var httpLine = regexp.MustCompile(`msg="broker started" .*http=(\S+)`)

// setMember is one broker process of a replicated set.
type setMember struct {
	id, raftAddr, dataDir string
	listen                string // its broker's address, kept across restarts
	grpc                  string // its gRPC listener (startSetGRPC), or ""
	args                  []string
	cmd                   *exec.Cmd
	http                  string
	exited                chan struct{}

	// logMu guards logTail: the member's last log lines, across its
	// restarts, for the report of a check that fails on its data.
	logMu   sync.Mutex
	logTail []string
}

// memberLogLines is how many of its last log lines a member keeps.
const memberLogLines = 400

// logLine keeps line in m's tail.
func (m *setMember) logLine(line string) {
	m.logMu.Lock()
	defer m.logMu.Unlock()
	if m.logTail = append(m.logTail, line); len(m.logTail) > memberLogLines {
		m.logTail = slices.Delete(m.logTail, 0, len(m.logTail)-memberLogLines)
	}
}

// reportLogs logs every member's last lines: what a check that found
// their stores wrong needs to tell how they came to be.
func (rs *replicatedSet) reportLogs() {
	for _, m := range rs.members {
		m.logMu.Lock()
		rs.t.Logf("member %s, its last %d log lines:\n%s", m.id, len(m.logTail), strings.Join(m.logTail, "\n"))
		m.logMu.Unlock()
	}
}

// replicatedSet runs a set's members as child processes.
type replicatedSet struct {
	t       *testing.T
	name    string
	members []*setMember
	races   atomic.Int32 // data races the members reported (under -race)

	// keepStores keeps the copies of the members' data directories that
	// storedBodies made (RMQ_KEEP_FAILED), for a check of what they
	// hold that fails after it.
	keepStores func()
}

// freeAddr returns a loopback address nothing listens on now, for a
// member that comes back on it after a kill (brokertest.StableAddr).
func freeAddr(t *testing.T) string {
	t.Helper()
	return brokertest.StableAddr(t)
}

// newMember returns member id, not started, with its data directory and
// its raft and broker addresses: both are the member's for good, as in a
// deployment, so a client holding an old route reaches this member or
// nothing, never another test's broker that took a freed port.
func newMember(t *testing.T, id string) *setMember {
	t.Helper()
	return &setMember{id: id, raftAddr: freeAddr(t), listen: freeAddr(t), dataDir: t.TempDir()}
}

// startNamesrv starts an in-process name server on a spare port; it stops
// after the test's other cleanups (the set's members unregister from it).
func startNamesrv(t *testing.T) *server.Server {
	t.Helper()
	ns, err := server.StartNamesrv(server.Config{NamesrvListen: "127.0.0.1:0", Logger: brokertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(context.Background()) })
	return ns
}

// waitingTest marks a test that spends most of its time waiting rather
// than computing: for the official client's route refresh (every 30 s),
// for a timed outage, for raft's timeouts. Such tests run beside one
// another, -parallel of them at once (GOMAXPROCS by default), after the
// package's other tests. Each starts its own name server and set, and
// names its clients' instances apart (brokertest.Name).
func waitingTest(t *testing.T) { t.Parallel() }

func startSet(t *testing.T, name string, n int, namesrvs []string) *replicatedSet {
	t.Helper()
	return startSetWith(t, name, n, namesrvs)
}

// startSetWith starts a set whose members take extra flags too. Raft's
// ports are picked free before the members start; one taken meanwhile by
// another socket fails a member's start, and the set starts again on new
// ports.
func startSetWith(t *testing.T, name string, n int, namesrvs []string, extra ...string) *replicatedSet {
	t.Helper()
	return startSetOn(t, name, n, namesrvs, false, extra...)
}

// startSetGRPC starts a set whose members serve gRPC too, each on a port
// picked free before it starts and kept across its restarts.
func startSetGRPC(t *testing.T, name string, n int, namesrvs []string, extra ...string) *replicatedSet {
	t.Helper()
	return startSetOn(t, name, n, namesrvs, true, extra...)
}

func startSetOn(t *testing.T, name string, n int, namesrvs []string, grpc bool, extra ...string) *replicatedSet {
	t.Helper()
	rs := &replicatedSet{t: t, name: name}
	t.Cleanup(func() {
		if n := rs.races.Load(); n > 0 {
			t.Errorf("members of %s reported %d data races (run with RMQ_TEST_CHILD_LOGS=1 to see them)", name, n)
		}
	})
	for attempt := 1; ; attempt++ {
		rs.members = nil
		var peers []string
		for i := range n {
			m := newMember(t, fmt.Sprintf("%s-%d", name, i))
			if grpc {
				m.grpc = freeAddr(t)
			}
			peers = append(peers, m.id+"="+m.raftAddr)
			rs.members = append(rs.members, m)
		}
		var err error
		for _, m := range rs.members {
			m.args = []string{"--set-name", name, "--node-id", m.id, "--peers", strings.Join(peers, ","),
				"--data-dir", m.dataDir, "--listen", m.listen, "--namesrv-listen", "", "--grpc-listen", m.grpc,
				"--namesrv", strings.Join(namesrvs, ","), "--http-listen", "127.0.0.1:0", "--log-level", "info"}
			m.args = append(m.args, extra...)
			if err = rs.startMember(m); err != nil {
				break
			}
		}
		if err == nil {
			return rs
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

// start starts a member again on its ports, waiting out a port another
// socket holds for a moment.
func (rs *replicatedSet) start(m *setMember) {
	rs.t.Helper()
	for attempt := 1; ; attempt++ {
		err := rs.startMember(m)
		if err == nil {
			return
		}
		if attempt == 5 || !strings.Contains(err.Error(), "address already in use") {
			rs.t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // a port held by a passing socket: no event to wait for
	}
}

// startMember runs m in a child process and waits until it serves, or
// returns why it did not (with its last log lines).
func (rs *replicatedSet) startMember(m *setMember) error {
	t := rs.t
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "RMQ_BROKER_CHILD_ARGS="+strings.Join(m.args, "\x1f"))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	m.cmd, m.exited = cmd, make(chan struct{})
	exited := m.exited
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	found := make(chan string, 1)
	var mu sync.Mutex
	var last []string
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if os.Getenv("RMQ_TEST_CHILD_LOGS") != "" {
				t.Log(m.id, line)
			}
			if strings.Contains(line, "WARNING: DATA RACE") {
				rs.races.Add(1)
			}
			m.logLine(line)
			mu.Lock()
			if last = append(last, line); len(last) > 20 {
				last = last[1:]
			}
			mu.Unlock()
			if mm := httpLine.FindStringSubmatch(line); mm != nil {
				found <- mm[1]
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
	}()
	select {
	case m.http = <-found:
		return nil
	case <-exited:
	case <-time.After(30 * time.Second):
	}
	cmd.Process.Kill()
	<-exited
	m.cmd = nil
	mu.Lock()
	defer mu.Unlock()
	return fmt.Errorf("member %s did not start; its last lines:\n%s", m.id, strings.Join(last, "\n"))
}

// kill stops a member with SIGKILL (or sig) and waits for it to exit.
func (rs *replicatedSet) kill(m *setMember, sig syscall.Signal) {
	m.cmd.Process.Signal(sig)
	<-m.exited
	m.cmd = nil
}

// memberStatus is a member's own view of its set, from its /cluster.
type memberStatus struct {
	State        string `json:"state"`
	Leader       string `json:"leader"`
	Serving      string `json:"serving"`
	Replica      string `json:"replica"`
	GRPC         string `json:"grpc"`
	CommitIndex  uint64 `json:"commitIndex"`
	AppliedIndex uint64 `json:"appliedIndex"`
	CommitLogEnd int64  `json:"commitLogEnd"`
	// SnapshotsInstalled counts the snapshots installed from a leader.
	SnapshotsInstalled int64 `json:"snapshotsInstalled"`
}

func (m *setMember) status() (memberStatus, bool) {
	var st memberStatus
	if m.cmd == nil {
		return st, false
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + m.http + "/cluster")
	if err != nil {
		return st, false
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st) == nil
}

// leader waits for the member serving as master.
func (rs *replicatedSet) leader() *setMember {
	rs.t.Helper()
	var l *setMember
	brokertest.Eventually(rs.t, 30*time.Second, "a leader serving in "+rs.name, func() bool {
		for _, m := range rs.members {
			if st, ok := m.status(); ok && st.State == "Leader" && st.Serving != "" {
				l = m
				return true
			}
		}
		return false
	})
	return l
}

// converged waits until every running member applied the same log.
func (rs *replicatedSet) converged() {
	rs.t.Helper()
	brokertest.Eventually(rs.t, 60*time.Second, "members of "+rs.name+" to converge", func() bool {
		var end int64 = -1
		for _, m := range rs.members {
			st, ok := m.status()
			if !ok || st.AppliedIndex < st.CommitIndex {
				return false
			}
			if end >= 0 && st.CommitLogEnd != end {
				return false
			}
			end = st.CommitLogEnd
		}
		return true
	})
}

// keepDirs copies the stopped members' data directories, as they were
// before any check opened them, when RMQ_KEEP_FAILED names a directory;
// the copies are removed unless the returned func is called, which logs
// where they are. A check that finds a store wrong keeps them there.
func (rs *replicatedSet) keepDirs() (keep func()) {
	root := os.Getenv("RMQ_KEEP_FAILED")
	if root == "" {
		return func() {}
	}
	dir, err := os.MkdirTemp(root, strings.ReplaceAll(rs.t.Name(), "/", "_")+"-")
	if err != nil {
		rs.t.Fatal(err)
	}
	for _, m := range rs.members {
		if err := os.CopyFS(filepath.Join(dir, m.id), os.DirFS(m.dataDir)); err != nil {
			rs.t.Fatal(err)
		}
	}
	kept := false
	rs.t.Cleanup(func() {
		if !kept {
			os.RemoveAll(dir)
		}
	})
	return func() {
		kept = true
		rs.t.Logf("the members' data directories, as they stopped, are kept in %s", dir)
	}
}

// servedBodies reads topic by queue offset from every member's broker,
// the leader and the replicas alike, as a consumer pulls: each queue
// from its first offset to its last, with no offset missing.
func (rs *replicatedSet) servedBodies(topic string) map[*setMember]map[string]int {
	rs.t.Helper()
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	call := func(addr string, code int16, ext map[string]string) (*remoting.Command, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cl.Invoke(ctx, addr, remoting.NewRequest(code, ext, nil))
	}
	out := map[*setMember]map[string]int{}
	for _, m := range rs.members {
		st, ok := m.status()
		addr := cmp.Or(st.Serving, st.Replica)
		if !ok || addr == "" {
			rs.t.Fatalf("member %s serves no reads: %+v", m.id, st)
		}
		got := map[string]int{}
		for q := range 32 {
			qid := strconv.Itoa(q)
			r, err := call(addr, remoting.GetMaxOffset, map[string]string{"topic": topic, "queueId": qid})
			if err != nil {
				rs.t.Fatalf("member %s: max offset of %s/%d: %v", m.id, topic, q, err)
			}
			end, _ := strconv.ParseInt(r.Get("offset"), 10, 64)
			if r.Code != remoting.Success || end == 0 {
				continue
			}
			r, err = call(addr, remoting.GetMinOffset, map[string]string{"topic": topic, "queueId": qid})
			if err != nil || r.Code != remoting.Success {
				rs.t.Fatalf("member %s: min offset of %s/%d: %v %v", m.id, topic, q, r, err)
			}
			next, _ := strconv.ParseInt(r.Get("offset"), 10, 64)
			for next < end {
				r, err := call(addr, remoting.PullMessage, map[string]string{"consumerGroup": "StoredCheck", "topic": topic,
					"queueId": qid, "queueOffset": strconv.FormatInt(next, 10), "maxMsgNums": "32",
					"sysFlag": "4", "subscription": "*", "expressionType": "TAG", "commitOffset": "0", "suspendTimeoutMillis": "0"})
				if err != nil || r.Code != remoting.Success {
					rs.reportLogs()
					rs.t.Fatalf("member %s: pull of %s/%d at %d (its queue ends at %d): %v %v", m.id, topic, q, next, end, r, err)
				}
				recs, err := message.DecodeRecords(r.Body)
				if err != nil || len(recs) == 0 {
					rs.t.Fatalf("member %s: pull of %s/%d at %d: %d records, %v", m.id, topic, q, next, len(recs), err)
				}
				for _, rec := range recs {
					if rec.QueueOffset() != next {
						rs.reportLogs()
						rs.t.Fatalf("member %s: pull of %s/%d: offset %d is missing, the next record served is at %d", m.id, topic, q, next, rec.QueueOffset())
					}
					got[string(rec.Body())]++
					next++
				}
			}
		}
		out[m] = got
	}
	return out
}

// storedBodies stops the set gracefully and reads topic from each
// member's data directory: every member must hold the same messages,
// and serve them (servedBodies) before it stops.
func (rs *replicatedSet) storedBodies(topic string) map[string]int {
	rs.t.Helper()
	rs.converged()
	served := rs.servedBodies(topic)
	for _, m := range rs.members {
		rs.kill(m, syscall.SIGTERM)
	}
	kept := rs.keepDirs()
	rs.keepStores = kept
	var first map[string]int
	for _, m := range rs.members {
		st, err := store.Open(store.Options{Dir: m.dataDir, Logger: brokertest.Logger()})
		if err != nil {
			rs.t.Fatal(err)
		}
		got := map[string]int{}
		for _, q := range st.Queues() {
			if q.Topic != topic {
				continue
			}
			it := st.NewQueueIter(topic, q.QueueID, store.IterOptions{StopOnCorruption: true})
			for ok := it.SeekGE(0); ok; ok = it.Next() {
				got[string(it.Record().Body())]++
			}
			if err := it.Close(); err != nil {
				rs.reportLogs()
				kept()
				rs.t.Fatalf("member %s: %v", m.id, err)
			}
		}
		st.Close()
		if !maps.Equal(got, served[m]) {
			rs.reportLogs()
			kept()
			rs.t.Fatalf("member %s served %d messages and holds %d", m.id, len(served[m]), len(got))
		}
		if first == nil {
			first = got
			continue
		}
		if !maps.Equal(got, first) {
			var differ []string
			for body, k := range first {
				if got[body] != k {
					differ = append(differ, fmt.Sprintf("%s %d≠%d", body, got[body], k))
				}
			}
			for body, k := range got {
				if _, ok := first[body]; !ok {
					differ = append(differ, fmt.Sprintf("%s %d≠0", body, k))
				}
			}
			slices.Sort(differ)
			rs.reportLogs()
			kept()
			rs.t.Fatalf("member %s holds %d messages, %s %d; they differ in %d: %v", m.id, len(got), rs.members[0].id, len(first), len(differ), differ[:min(len(differ), 10)])
		}
	}
	return first
}

// TestReplicatedSetKillLeaderDuringSends kills the set's leader with
// SIGKILL while producers send synchronously, again and again: every
// acknowledged message is stored, once, on every member.
func TestReplicatedSetKillLeaderDuringSends(t *testing.T) {
	waitingTest(t)
	ns := startNamesrv(t)
	rs := startSet(t, "set-a", 3, []string{ns.NamesrvAddr})
	kills := 20
	if testing.Short() {
		kills = 3
	}
	const topic = "Replicated"
	acked := map[string]bool{}
	var mu sync.Mutex
	var failovers []time.Duration
	var killedAt time.Time
	for round := range kills {
		l := rs.leader()
		if round > 0 {
			failovers = append(failovers, time.Since(killedAt))
		}
		p, err := producer.NewDefaultProducer(
			producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.NamesrvAddr})),
			producer.WithInstanceName(brokertest.Name(fmt.Sprintf("kill%d", round))),
			producer.WithRetry(0),
			producer.WithSendMsgTimeout(3*time.Second),
		)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		var killed atomic.Bool
		var n atomic.Int64
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					body := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)))
					if err == nil && res.Status == primitive.SendOK {
						mu.Lock()
						acked[body] = true
						mu.Unlock()
						n.Add(1)
					}
					if killed.Load() {
						return
					}
				}
			}()
		}
		brokertest.Eventually(t, 60*time.Second, "sends to the leader", func() bool { return n.Load() >= 200 })
		rs.kill(l, syscall.SIGKILL)
		killedAt = time.Now()
		killed.Store(true)
		wg.Wait()
		p.Shutdown()
		rs.start(l)
	}
	rs.converged()
	var https []string
	for _, m := range rs.members {
		https = append(https, m.http)
	}
	code, out, errOut := runCmd("admin", "cluster", "status", "--members", strings.Join(https, ","))
	if code != 0 || strings.Count(out, "Leader (master at") != 1 || strings.Count(out, "Follower") != 2 || !strings.Contains(out, "LOG SPAN") {
		t.Fatalf("cluster status = %d\n%s%s", code, out, errOut)
	}
	t.Logf("broker admin cluster status:\n%s", out)
	// Each member's /metrics: the leader's carries the broker's series.
	leaders := 0
	for _, m := range rs.members {
		resp, err := http.Get("http://" + m.http + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text := string(body)
		lead := strings.Contains(text, `rmq_cluster_leader{node="`+m.id+`",set="set-a"} 1`)
		if lead {
			leaders++
		}
		if broker := strings.Contains(text, "\nrmq_connections "); broker != lead {
			t.Fatalf("%s: leader %v, broker series %v:\n%s", m.id, lead, broker, text)
		}
		if !strings.Contains(text, "rmq_store_messages_appended_total") || !strings.Contains(text, "rmq_cluster_applied_index") ||
			!strings.Contains(text, "rmq_cluster_log_span_seconds{") {
			t.Fatalf("%s: store or cluster series missing", m.id)
		}
	}
	if leaders != 1 {
		t.Fatalf("%d members report leading", leaders)
	}
	// The console is the master's; a replica's names the leader.
	for _, m := range rs.members {
		st, _ := m.status()
		resp, err := http.Get("http://" + m.http + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case st.Serving != "" && (resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "set-a")):
			t.Fatalf("the leader's console: %d\n%s", resp.StatusCode, body)
		case st.Serving == "" && (resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "replica")):
			t.Fatalf("a replica's console: %d\n%s", resp.StatusCode, body)
		}
	}
	got := rs.storedBodies(topic)
	for body := range acked {
		if got[body] != 1 {
			t.Fatalf("acknowledged %s stored %d times", body, got[body])
		}
	}
	for body, c := range got {
		if c != 1 {
			t.Fatalf("%s stored %d times", body, c)
		}
	}
	slices.Sort(failovers)
	t.Logf("%d leader kills: %d acknowledged, %d stored on every member; a new leader served after %v (median; range %v–%v)",
		kills, len(acked), len(got), failovers[len(failovers)/2], failovers[0], failovers[len(failovers)-1])
}

// TestTwoReplicatedSetsTwoNameServers runs two sets of three members
// behind two name servers: the official client produces to and consumes
// from both; losing a name server changes nothing; losing a whole set
// moves the producer to the other within its retries.
func TestTwoReplicatedSetsTwoNameServers(t *testing.T) {
	var nss []*server.Server
	var addrs []string
	for range 2 {
		ns, err := server.StartNamesrv(server.Config{NamesrvListen: "127.0.0.1:0", Logger: brokertest.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ns.Shutdown(context.Background()) })
		nss, addrs = append(nss, ns), append(addrs, ns.NamesrvAddr)
	}
	a, b := startSetGRPC(t, "set-a", 3, addrs), startSetGRPC(t, "set-b", 3, addrs)
	a.leader()
	b.leader()
	for _, ns := range nss {
		brokertest.Eventually(t, 30*time.Second, "both sets registered", func() bool {
			r, ok := ns.NS.Route("TBW102")
			return ok && len(r.BrokerDatas) == 2
		})
	}
	topic, group := brokertest.Name("TwoSets"), brokertest.Name("cg")
	if code, out, errOut := runCmd("admin", "topics", "create", "--topic", topic, "--namesrv", addrs[0], "--cluster", "DefaultCluster",
		"--read-queues", "2", "--write-queues", "2"); code != 0 {
		t.Fatalf("create topic: %d %s %s", code, out, errOut)
	}
	resolver := primitive.NewPassthroughResolver(addrs)
	p, err := producer.NewDefaultProducer(producer.WithNsResolver(resolver), producer.WithInstanceName(brokertest.Name("two-sets")),
		producer.WithRetry(2), producer.WithSendMsgTimeout(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown()
	var mu sync.Mutex
	consumed := map[string]string{} // body → set
	c, err := consumer.NewPushConsumer(consumer.WithNsResolver(resolver), consumer.WithGroupName(group),
		consumer.WithInstance(brokertest.Name("two-sets-c")), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		for _, m := range msgs {
			consumed[string(m.Body)] = m.Queue.BrokerName
		}
		mu.Unlock()
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	send := func(prefix string, n int) map[string]int {
		t.Helper()
		to := map[string]int{}
		for i := range n {
			res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("%s-%d", prefix, i))))
			if err != nil || res.Status != primitive.SendOK {
				t.Fatalf("send %s-%d: %v %v", prefix, i, res, err)
			}
			to[res.MessageQueue.BrokerName]++
		}
		return to
	}
	allConsumed := func(prefix string, n int) map[string]int {
		t.Helper()
		from := map[string]int{}
		brokertest.Eventually(t, 60*time.Second, prefix+" consumed", func() bool {
			mu.Lock()
			defer mu.Unlock()
			clear(from)
			for i := range n {
				if set, ok := consumed[fmt.Sprintf("%s-%d", prefix, i)]; ok {
					from[set]++
				}
			}
			return from["set-a"]+from["set-b"] == n
		})
		return from
	}
	to := send("both", 40)
	if to["set-a"] == 0 || to["set-b"] == 0 {
		t.Fatalf("sends went to %v, want both sets", to)
	}
	if from := allConsumed("both", 40); from["set-a"] != to["set-a"] {
		t.Fatalf("consumed %v, sent %v", from, to)
	}
	// A RocketMQ 5 client given any member of either set is routed to
	// both sets, each at its leader's gRPC endpoint.
	want := map[string]string{"set-a": a.leader().grpc, "set-b": b.leader().grpc}
	gc := newGRPCSetClient(t, brokertest.Name("two-sets-grpc"), a)
	for _, m := range append(slices.Clone(a.members), b.members...) {
		ctx, cancel := gc.ctx(5 * time.Second)
		r, err := gc.client(m.grpc).QueryRoute(ctx, &pb.QueryRouteRequest{Topic: &pb.Resource{Name: topic}})
		cancel()
		if err != nil || r.Status.GetCode() != pb.Code_OK {
			t.Fatalf("gRPC route from %s: %v %v", m.id, r, err)
		}
		got := map[string]string{}
		for _, q := range r.MessageQueues {
			ep := q.GetBroker().GetEndpoints().GetAddresses()[0]
			got[q.GetBroker().GetName()] = net.JoinHostPort(ep.Host, strconv.Itoa(int(ep.Port)))
		}
		if !maps.Equal(got, want) || len(r.MessageQueues) != 4 {
			t.Fatalf("gRPC route from %s names %v in %d queues, want %v in 4", m.id, got, len(r.MessageQueues), want)
		}
	}

	// A name server goes: nothing changes.
	nss[0].Shutdown(context.Background())
	to = send("one-ns", 40)
	if to["set-a"] == 0 || to["set-b"] == 0 {
		t.Fatalf("after a name server stopped, sends went to %v", to)
	}
	allConsumed("one-ns", 40)

	// A whole set goes: the producer's retries move every send to the
	// other set.
	for _, m := range b.members {
		b.kill(m, syscall.SIGKILL)
	}
	to = send("one-set", 40)
	if to["set-b"] != 0 || to["set-a"] != 40 {
		t.Fatalf("after set-b stopped, sends went to %v", to)
	}
	allConsumed("one-set", 40)
}

// TestReplicaServesPullsWithoutMajority loses the leader and a second
// member of a set of three: the last member cannot take writes, but its
// replica keeps serving what the set stored, and a consumer reads every
// message from it once the name server forgets the master.
func TestReplicaServesPullsWithoutMajority(t *testing.T) {
	ns, err := server.StartNamesrv(server.Config{NamesrvListen: "127.0.0.1:0", Logger: brokertest.Logger(),
		EmbeddedNamesrv: namesrv.Options{BrokerExpiry: 3 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Shutdown(context.Background())
	conf := filepath.Join(t.TempDir(), "member.yaml")
	if err := os.WriteFile(conf, []byte("registerInterval: 500ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := startSetWith(t, "set-r", 3, []string{ns.NamesrvAddr}, "--config", conf)
	l := rs.leader()
	topic := brokertest.Name("FromReplica")
	p, err := producer.NewDefaultProducer(producer.WithNsResolver(primitive.NewPassthroughResolver([]string{ns.NamesrvAddr})),
		producer.WithInstanceName(brokertest.Name("replica-p")), producer.WithRetry(2))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("m-%d", i)))); err != nil {
			t.Fatal(err)
		}
	}
	p.Shutdown()
	rs.converged()
	var last *setMember
	for _, m := range rs.members {
		if m != l && last == nil {
			last = m
			continue
		}
		rs.kill(m, syscall.SIGKILL)
	}
	// The master's registration expires; the replica's stays.
	brokertest.Eventually(t, 30*time.Second, "a route naming only the replica", func() bool {
		r, ok := ns.NS.Route(topic)
		if !ok || len(r.BrokerDatas) != 1 {
			return false
		}
		_, master := r.BrokerDatas[0].BrokerAddrs[0]
		return !master && len(r.BrokerDatas[0].BrokerAddrs) == 1
	})
	// This project's client: the official Go client asks only a master
	// for offsets, so with none in the route it never starts pulling.
	var mu sync.Mutex
	got := map[string]bool{}
	c, err := client.NewPushConsumer(client.ConsumerOptions{
		Client: client.ClientOptions{NameServers: []string{ns.NamesrvAddr}, InstanceName: brokertest.Name("replica-c"), Logger: brokertest.Logger()},
		Group:  brokertest.Name("replica-cg"), ConsumeFrom: client.ConsumeFromFirstOffset},
		client.ConcurrentFunc(func(_ context.Context, _ *client.ConcurrentContext, msgs []*client.MessageExt) client.ConsumeResult {
			mu.Lock()
			for _, m := range msgs {
				got[string(m.Body)] = true
			}
			mu.Unlock()
			return client.ConsumeSuccess
		}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, client.Selector{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown(context.Background())
	brokertest.Eventually(t, 60*time.Second, "every message consumed from the replica", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == n
	})
	st, ok := last.status()
	if !ok || st.State == "Leader" || st.Replica == "" {
		t.Fatalf("the last member: %+v", st)
	}
	// Writes to the replica are refused, naming the master.
	rc := remoting.NewClient(remoting.ClientOptions{})
	defer rc.Close()
	resp, err := rc.Invoke(context.Background(), st.Replica, remoting.NewRequest(remoting.SendMessage, map[string]string{"topic": topic}, []byte("x")))
	if err != nil || resp.Code != remoting.NoPermission || !strings.Contains(resp.Remark, "replica") {
		t.Fatalf("a send to the replica: %v %v", resp, err)
	}
}
