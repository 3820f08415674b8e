package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/cluster"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/metrics"
	"github.com/rmq-go/rmq/internal/server"
)

// logRecords is a slog handler keeping every record, for tests that
// check what was logged and at which level.
type logRecords struct {
	mu   *sync.Mutex
	recs *[]slog.Record
}

func newLogRecords() logRecords { return logRecords{mu: new(sync.Mutex), recs: new([]slog.Record)} }

func (l logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	*l.recs = append(*l.recs, r.Clone())
	l.mu.Unlock()
	return nil
}
func (l logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l logRecords) WithGroup(string) slog.Handler      { return l }

// find returns the records at level or above whose message or attributes
// contain s.
func (l logRecords) find(level slog.Level, s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range *l.recs {
		if r.Level < level {
			continue
		}
		line := r.Message
		r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
		if strings.Contains(line, s) {
			out = append(out, r.Level.String()+" "+line)
		}
	}
	return out
}

// setServer is one member of an in-process replicated set.
type setServer struct {
	srv  *server.Server
	logs logRecords
	stop func()
}

// startServerSet runs a set of n members in this process on loopback,
// with raft's timeouts short, and returns them once one leads. tune, if
// any, changes member i's config.
func startServerSet(t *testing.T, n int, tune ...func(i int, c *server.Config)) []*setServer {
	t.Helper()
	var peers []cluster.Peer
	for i := range n {
		// Members restart on their raft addresses.
		peers = append(peers, cluster.Peer{ID: fmt.Sprintf("m%d", i), Addr: brokertest.StableAddr(t)})
	}
	name := brokertest.Name("set")
	members := make([]*setServer, n)
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logs := newLogRecords()
			cfg := server.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: slog.New(logs),
				Cluster: &cluster.Options{SetName: name, NodeID: peers[i].ID, Peers: peers,
					HeartbeatTimeout: 300 * time.Millisecond, ElectionTimeout: 300 * time.Millisecond,
					LeaderLeaseTimeout: 200 * time.Millisecond}}
			for _, fn := range tune {
				fn(i, &cfg)
			}
			srv, err := server.Start(cfg)
			if err != nil {
				errs[i] = err
				return
			}
			var once sync.Once
			m := &setServer{srv: srv, logs: logs}
			m.stop = func() {
				once.Do(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
					defer cancel()
					srv.Shutdown(ctx)
				})
			}
			members[i] = m
		}()
	}
	wg.Wait()
	for _, m := range members {
		if m != nil {
			t.Cleanup(m.stop)
		}
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	serverSetLeader(t, members, nil)
	return members
}

// serverSetLeader waits for a member other than not to serve as master.
func serverSetLeader(t *testing.T, members []*setServer, not *setServer) *setServer {
	t.Helper()
	var l *setServer
	brokertest.Eventually(t, 20*time.Second, "a member to serve as master", func() bool {
		for _, m := range members {
			if m != not && m.srv.LeaderBrokerAddr() != "" && m.srv.Node().Leading() {
				l = m
				return true
			}
		}
		return false
	})
	return l
}

// sendTo sends one message straight to a broker's port.
func sendTo(t *testing.T, cl *remoting.Client, addr, topic, body string) *remoting.Command {
	t.Helper()
	req := remoting.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties": string(message.EncodeProperties(nil)), "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
	}, []byte(body))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, addr, req)
	if err != nil {
		t.Fatalf("send to %s: %v", addr, err)
	}
	return resp
}

// TestSetMasterLosingLeadershipAnswersRetriable sends to a set's master
// while it loses its majority: the send in flight is answered
// SERVICE_NOT_AVAILABLE, which the official clients retry on another
// broker, naming the set's master, and nothing is logged at warning or
// above for it. A replica refuses sends the same way, naming the leader.
func TestSetMasterLosingLeadershipAnswersRetriable(t *testing.T) {
	members := startServerSet(t, 3)
	l := serverSetLeader(t, members, nil)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	topic := brokertest.Name("Lost")
	if resp := sendTo(t, cl, l.srv.LeaderBrokerAddr(), topic, "first"); resp.Code != remoting.Success {
		t.Fatalf("send to the master: %d %s", resp.Code, resp.Remark)
	}
	var followers []*setServer
	for _, m := range members {
		if m != l {
			followers = append(followers, m)
		}
	}
	// A replica refuses, naming the leader's node.
	leaderID := l.srv.Node().Status().Node
	brokertest.Eventually(t, 10*time.Second, "the replica to serve", func() bool { return followers[0].srv.Node().LeaderID() == leaderID })
	if resp := sendTo(t, cl, replicaAddr(t, followers[0]), topic, "to-replica"); !retriable(resp.Code) || !strings.Contains(resp.Remark, leaderID) {
		t.Fatalf("a send to a replica: %d %q", resp.Code, resp.Remark)
	}
	// The master loses its majority with a send and an offset commit in
	// flight.
	addr := l.srv.LeaderBrokerAddr()
	for _, f := range followers {
		f.stop()
	}
	var commit *remoting.Command
	done := make(chan struct{})
	go func() {
		defer close(done)
		commit = updateOffset(t, cl, addr, "cg", topic, 1)
	}()
	resp := sendTo(t, cl, addr, topic, "lost")
	<-done
	if resp.Code != remoting.ServiceNotAvailable || !strings.Contains(resp.Remark, "master") {
		t.Fatalf("a send to a master losing its majority: %d %q", resp.Code, resp.Remark)
	}
	if commit.Code != remoting.ServiceNotAvailable || !strings.Contains(commit.Remark, "master") {
		t.Fatalf("an offset commit to a master losing its majority: %d %q", commit.Code, commit.Remark)
	}
	if got := l.logs.find(slog.LevelWarn, "not the leader"); len(got) > 0 {
		t.Fatalf("the refusal was logged at warning or above: %q", got)
	}
}

// updateOffset commits a consumer offset at a broker and waits for the
// answer.
func updateOffset(t *testing.T, cl *remoting.Client, addr, group, topic string, off int64) *remoting.Command {
	req := remoting.NewRequest(remoting.UpdateConsumerOffset, map[string]string{
		"consumerGroup": group, "topic": topic, "queueId": "0", "commitOffset": strconv.FormatInt(off, 10)}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, addr, req)
	if err != nil {
		t.Errorf("update offset at %s: %v", addr, err)
		return &remoting.Command{Code: -1}
	}
	return resp
}

// TestSetOffsetCommitSurvivesMaster commits offsets at a set's master,
// waiting for each answer, and stops the master at once: the next master
// answers them.
func TestSetOffsetCommitSurvivesMaster(t *testing.T) {
	members := startServerSet(t, 3)
	l := serverSetLeader(t, members, nil)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	topic := brokertest.Name("Kept")
	for i := range 5 {
		if resp := sendTo(t, cl, l.srv.LeaderBrokerAddr(), topic, fmt.Sprint("m", i)); resp.Code != remoting.Success {
			t.Fatalf("send: %d %s", resp.Code, resp.Remark)
		}
	}
	for off := int64(1); off <= 5; off++ {
		if resp := updateOffset(t, cl, l.srv.LeaderBrokerAddr(), "cg", topic, off); resp.Code != remoting.Success {
			t.Fatalf("update offset: %d %s", resp.Code, resp.Remark)
		}
	}
	l.stop()
	nl := serverSetLeader(t, members, l)
	req := remoting.NewRequest(remoting.QueryConsumerOffset, map[string]string{"consumerGroup": "cg", "topic": topic, "queueId": "0"}, nil)
	resp, err := cl.Invoke(context.Background(), nl.srv.LeaderBrokerAddr(), req)
	if err != nil || resp.Code != remoting.Success || resp.Get("offset") != "5" {
		t.Fatalf("the new master's offset: %v %v", resp, err)
	}
}

// retriable reports whether the official clients send again, to another
// broker, after a response with code.
func retriable(code int16) bool {
	return code == remoting.ServiceNotAvailable || code == remoting.NoPermission
}

// replicaAddr is the address a member serves on as a replica.
func replicaAddr(t *testing.T, m *setServer) string {
	t.Helper()
	var addr string
	brokertest.Eventually(t, 10*time.Second, "the member to serve as a replica", func() bool {
		addr = m.srv.ReplicaBrokerAddr()
		return addr != ""
	})
	return addr
}

// TestSetMemberWithFailingDiskStopsServing fails every commit-log write
// of a replica: the member leaves its set and its broker stops serving,
// reads included, while the other two go on taking sends. Its gRPC port
// closes, so RocketMQ 5 clients are refused at once instead of waiting
// on a connection no endpoint will take.
func TestSetMemberWithFailingDiskStopsServing(t *testing.T) {
	var faults [3]atomic.Bool
	members := startServerSet(t, 3, func(i int, c *server.Config) {
		c.GRPCListen = "127.0.0.1:0"
		c.Store.FS = errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
			if faults[i].Load() && op.Kind == errorfs.OpFileWriteAt && strings.Contains(op.Path, "commitlog") {
				return errorfs.ErrInjected
			}
			return nil
		}))
	})
	l := serverSetLeader(t, members, nil)
	fi := 0
	for i, m := range members {
		if m != l {
			fi = i
			break
		}
	}
	f := members[fi]
	replicaAddr(t, f)
	faults[fi].Store(true)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	topic := brokertest.Name("Faulty")
	for i := range 20 {
		if resp := sendTo(t, cl, l.srv.LeaderBrokerAddr(), topic, fmt.Sprint("m", i)); resp.Code != remoting.Success {
			t.Fatalf("send with one replica's disk failing: %d %s", resp.Code, resp.Remark)
		}
	}
	brokertest.Eventually(t, 10*time.Second, "the failed member to stop serving", func() bool {
		return f.srv.Node().Failed() != nil && f.srv.ReplicaBrokerAddr() == "" && f.srv.LeaderBrokerAddr() == ""
	})
	if got := f.logs.find(slog.LevelError, "serves nothing until restarted"); len(got) == 0 {
		t.Fatal("the member's failure was not logged at error level")
	}
	brokertest.Eventually(t, 10*time.Second, "the failed member's gRPC port to refuse connections", func() bool {
		c, err := net.DialTimeout("tcp", f.srv.GRPCAddr, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.New(metrics.Options{Cluster: f.srv.Node().Status,
		Source: func() (*store.Store, *broker.Broker) { return f.srv.Node().Store(), nil }}))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	failed := -1.0
	for _, mf := range families {
		if mf.GetName() == "rmq_cluster_failed" {
			failed = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if failed != 1 {
		t.Fatalf("rmq_cluster_failed is %v on the failed member", failed)
	}
}
