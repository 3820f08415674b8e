package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/plugins/natsbridge"
)

// TestReplicatedSetNATSBridgeFailover runs the NATS bridge on a set of
// three members while failing consumers' messages go to retry and to the
// dead-letter topic, and kills the leader with SIGKILL during the traffic
// (twice; RMQ_BRIDGE_KILLS=n for more), then hands leadership over with
// transfer-leader. Every event the set stored reaches
// NATS under its one message id, each acknowledged move's event among
// them; republished events are no more than a failover's window, and the
// stream, deduplicating by message id, holds each event once. A replica
// answers "bridge status" by naming the leader.
func TestReplicatedSetNATSBridgeFailover(t *testing.T) {
	const perRound = 1500 // moves between failovers
	kills := 2
	if v, err := strconv.Atoi(os.Getenv("RMQ_BRIDGE_KILLS")); err == nil && v > 0 {
		kills = v
	}
	nsrv, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	nsrv.Start()
	t.Cleanup(nsrv.Shutdown)
	if !nsrv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	// Every publish, duplicates included, as a core subscriber sees it.
	nc, err := nats.Connect(nsrv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var seenMu sync.Mutex
	seen := map[string]int{}   // Nats-Msg-Id → publishes
	moved := map[string]bool{} // kind + Rmq-Msg-Id
	sub, err := nc.Subscribe("rmq.DefaultCluster.>", func(m *nats.Msg) {
		seenMu.Lock()
		seen[m.Header.Get(natsbridge.HeaderMsgID)]++
		moved[m.Header.Get(natsbridge.HeaderEvent)+" "+m.Header.Get(natsbridge.HeaderRmqMsgID)] = true
		seenMu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	sub.SetPendingLimits(-1, -1)
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	ns := startNamesrv(t)
	// A short checkpoint interval and window keep a failover's replay
	// small, so the bound below tells a resumed cursor from a lost one.
	const memberConf = "store: {checkpointInterval: 200ms}\nnatsBridge:\n  urls: [%s]\n  provision: true\n  maxInFlight: 64\n"
	conf := filepath.Join(t.TempDir(), "member.yaml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(memberConf, nsrv.ClientURL())), 0o644); err != nil {
		t.Fatal(err)
	}
	const set = "set-nb"
	rs := startSetWith(t, set, 3, []string{ns.NamesrvAddr}, "--config", conf)

	// The leader's broker address, and a channel closed when it changes.
	var addrMu sync.Mutex
	var addr string
	moved2 := make(chan struct{})
	setLeader := func(m *setMember) {
		st, _ := m.status()
		addrMu.Lock()
		addr = st.Serving
		close(moved2)
		moved2 = make(chan struct{})
		addrMu.Unlock()
	}
	leaderAddr := func() (string, <-chan struct{}) {
		addrMu.Lock()
		defer addrMu.Unlock()
		return addr, moved2
	}
	l := rs.leader()
	setLeader(l)

	// A failing consumer's messages, as the official client sends them
	// back when CONSUMER_SEND_MSG_BACK is not answered: to %RETRY%<group>,
	// a retry while retries are left (reconsumeTimes 1 of 2), a dead
	// letter once they are used up (3 of 2). Each is sent until
	// acknowledged, to whichever member leads.
	group := brokertest.Name("cg")
	if code, _, errOut := runCmd("admin", "--broker", addr, "groups", "create", "--group", group, "--retry-max", "2"); code != 0 {
		t.Fatalf("groups create: exit %d: %s", code, errOut)
	}
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	var acked sync.Map // kind + UNIQ_KEY of acknowledged moves
	var nAcked atomic.Int64
	var lastErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				kind, rt := outbox.KindRetry, "1"
				if i%2 == 1 {
					kind, rt = outbox.KindDLQ, "3"
				}
				key := fmt.Sprintf("W%d-%06d", w, i)
				props := map[string]string{"UNIQ_KEY": key, "RETRY_TOPIC": "Orders", "ORIGIN_MESSAGE_ID": key}
				if kind == outbox.KindRetry {
					props["DELAY"] = "1"
				}
				req := remoting.NewRequest(remoting.SendMessage, map[string]string{
					"producerGroup": "CLIENT_INNER_PRODUCER", "topic": broker.RetryGroupTopicPrefix + group, "defaultTopic": "TBW102",
					"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0", "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
					"flag": "0", "properties": string(message.EncodeProperties(props)), "reconsumeTimes": rt, "unitMode": "false",
					"maxReconsumeTimes": "2", "batch": "false",
				}, []byte("failed "+key))
				for {
					select {
					case <-stop:
						return
					default:
					}
					to, changed := leaderAddr()
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					resp, err := cl.Invoke(ctx, to, req)
					cancel()
					if err == nil && resp.Code == remoting.Success {
						acked.Store(kind+" "+key, true)
						nAcked.Add(1)
						break
					}
					if err == nil {
						err = fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
					}
					lastErr.Store(err.Error())
					select { // the leader is gone or not serving: wait for the next
					case <-changed:
					case <-stop:
						return
					}
				}
			}
		}()
	}
	began := time.Now()
	stopTraffic := sync.OnceFunc(func() { close(stop); wg.Wait() })
	defer stopTraffic()

	waitMoves := func(n int64, what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for nAcked.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %d of %d; the last refusal: %v", what, nAcked.Load(), n, lastErr.Load())
			}
			time.Sleep(10 * time.Millisecond) // polling a counter
		}
	}
	for k := range kills {
		target := nAcked.Load() + perRound
		waitMoves(target, "moves acknowledged by the leader")
		rs.kill(l, syscall.SIGKILL)
		t.Logf("kill %d: leader %s killed after %d acknowledged moves", k+1, l.id, nAcked.Load())
		old := l
		l = rs.leader()
		setLeader(l)
		rs.start(old)
	}
	// A handover: the leader's bridge stops when it steps down, settling
	// what it has in flight, and the next one's starts.
	waitMoves(nAcked.Load()+perRound, "moves acknowledged by the leader")
	st, _ := l.status()
	if code, out, errOut := runCmd("admin", "--broker", st.Serving, "cluster", "transfer-leader"); code != 0 {
		t.Fatalf("transfer-leader: exit %d: %s%s", code, out, errOut)
	}
	old := l
	brokertest.Eventually(t, 30*time.Second, "another member leading", func() bool { l = rs.leader(); return l != old })
	setLeader(l)
	t.Logf("leadership moved from %s to %s after %d acknowledged moves", old.id, l.id, nAcked.Load())
	target := nAcked.Load() + perRound
	waitMoves(target, "moves acknowledged by the last leader")
	stopTraffic()
	trafficTime := time.Since(began)

	// The leader's bridge catches up with the outbox.
	st, _ = l.status()
	var bs natsbridge.Status
	brokertest.Eventually(t, 30*time.Second, "the leader's bridge to reach the end of the outbox", func() bool {
		code, out, _ := runCmd("admin", "--broker", st.Serving, "--json", "bridge", "status")
		bs = natsbridge.Status{}
		return code == 0 && json.Unmarshal([]byte(out), &bs) == nil && bs.Head > 0 && bs.Cursor == bs.Head && bs.InFlight == 0
	})
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	// Every event the set stored, under the one epoch the set keeps.
	prefix := fmt.Sprintf("DefaultCluster-%s-%s-", set, bs.Epoch)
	seenMu.Lock()
	defer seenMu.Unlock()
	publishes, missing := 0, 0
	for id, n := range seen {
		if !strings.HasPrefix(id, prefix) {
			t.Errorf("event %s: not under the set's epoch (%s...)", id, prefix)
		}
		publishes += n
	}
	for off := bs.Head - 1; off >= 0; off-- {
		if seen[prefix+strconv.FormatInt(off, 10)] == 0 {
			if missing++; missing <= 5 {
				t.Errorf("event at outbox offset %d never reached NATS", off)
			}
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d events never reached NATS", missing, bs.Head)
	}
	if int64(len(seen)) != bs.Head {
		t.Fatalf("%d distinct events reached NATS, the outbox holds %d", len(seen), bs.Head)
	}
	lost := 0
	acked.Range(func(k, _ any) bool {
		if !moved[k.(string)] {
			if lost++; lost <= 5 {
				t.Errorf("acknowledged move %s: no event", k)
			}
		}
		return true
	})
	if lost > 0 {
		t.Fatalf("%d acknowledged moves without an event", lost)
	}
	// A failover republishes what its predecessor published past the
	// cursor the set had applied: what was in flight, and what was
	// acknowledged since the cursor was last set (CursorInterval) and
	// proposed (the store's CheckpointInterval), give or take a commit.
	dups := publishes - len(seen)
	window := natsbridge.DefaultCursorInterval + 200*time.Millisecond + time.Second
	rate := float64(bs.Head) / trafficTime.Seconds()
	if limit := (kills + 1) * (64 + int(rate*window.Seconds())); dups > limit {
		t.Errorf("%d events published twice over %d changes of leader, more than %d (%.0f events/s, a %v window each)", dups, kills+1, limit, rate, window)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(context.Background(), natsbridge.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != uint64(bs.Head) {
		t.Errorf("the stream holds %d events, want %d once each", info.State.Msgs, bs.Head)
	}
	t.Logf("%d kills and a handover in %v: %d acknowledged moves, %d events (%.0f/s), %d publishes (%d republished), stream holds %d",
		kills, trafficTime.Round(time.Millisecond), nAcked.Load(), bs.Head, rate, publishes, dups, info.State.Msgs)

	// The member that handed leadership over is a replica now: its
	// bridge stopped, and its broker names the leader.
	var replica string
	brokertest.Eventually(t, 30*time.Second, "the former leader serving as a replica", func() bool {
		ms, ok := old.status()
		replica = ms.Replica
		return ok && replica != ""
	})
	code, _, errOut := runCmd("admin", "--broker", replica, "bridge", "status")
	if code == 0 || !strings.Contains(errOut, "runs on the set's leader") || !strings.Contains(errOut, l.id) {
		t.Errorf("bridge status on replica %s: exit %d: %s", old.id, code, errOut)
	}
}
