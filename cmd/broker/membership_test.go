package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestReplicatedSetMembership changes a running set's membership with
// `broker admin cluster`: a fourth member started with --join is added and
// catches up, leadership is handed to it, the old leader is removed, and
// a member whose disk is wiped is replaced (removed, started empty with
// --join under its id, added again). Sends go on between the steps, and
// at the end every member holds every acknowledged message, readable by
// queue offset.
func TestReplicatedSetMembership(t *testing.T) {
	ns := startNamesrv(t)
	rs := startSet(t, "set-m", 3, []string{ns.NamesrvAddr})
	const topic = "Members"
	acked := map[string]bool{}
	send := func(step string, n int) { t.Helper(); sendEach(t, ns.NamesrvAddr, topic, step, n, acked) }
	admin := func(l *setMember, args ...string) string {
		t.Helper()
		st, _ := l.status()
		code, out, errs := runCmd(append([]string{"admin", "--broker", st.Serving, "cluster"}, args...)...)
		if code != 0 {
			t.Fatalf("broker admin cluster %v: exit %d: %s%s", args, code, out, errs)
		}
		return out
	}
	joining := func(m *setMember) {
		m.args = memberArgs(rs, m, append(rs.members, m), ns.NamesrvAddr, "--join")
		rs.start(m)
	}

	createSetTopic(t, rs, ns.NamesrvAddr, topic)
	send("first", 50)
	// A fourth member joins and catches up.
	fourth := newMember(t, "set-m-3")
	joining(fourth)
	l := rs.leader()
	if out := admin(l, "add-member", "--id", fourth.id, "--raft-addr", fourth.raftAddr); !strings.Contains(out, fourth.id) {
		t.Fatalf("add-member printed no %s:\n%s", fourth.id, out)
	}
	rs.members = append(rs.members, fourth)
	rs.converged()
	send("four", 50)

	// Leadership moves to the new member; the old leader leaves the set.
	admin(l, "transfer-leader", "--to", fourth.id)
	brokertest.Eventually(t, 30*time.Second, "the new member leading", func() bool { return rs.leader() == fourth })
	admin(fourth, "remove-member", "--id", l.id)
	rs.kill(l, syscall.SIGTERM)
	rs.members = without(rs.members, l)
	send("moved", 50)

	// A member whose disk is lost is replaced under its id.
	wiped := rs.members[0]
	if wiped == fourth {
		wiped = rs.members[1]
	}
	rs.kill(wiped, syscall.SIGKILL)
	admin(rs.leader(), "remove-member", "--id", wiped.id)
	if err := os.RemoveAll(wiped.dataDir); err != nil {
		t.Fatal(err)
	}
	rs.members = without(rs.members, wiped)
	joining(wiped)
	admin(rs.leader(), "add-member", "--id", wiped.id, "--raft-addr", wiped.raftAddr)
	rs.members = append(rs.members, wiped)
	send("replaced", 50)

	// A member that does not lead refuses, naming the leader.
	for _, m := range rs.members {
		if m != rs.leader() {
			st, _ := m.status()
			code, _, errs := runCmd("admin", "--broker", st.Replica, "cluster", "remove-member", "--id", fourth.id)
			if code == 0 || !strings.Contains(errs, "not the leader") || !strings.Contains(errs, rs.leader().id) {
				t.Errorf("remove-member asked of a follower: exit %d, %q", code, errs)
			}
			break
		}
	}

	rs.checkStoredOnce(topic, acked, true)
}

func without(ms []*setMember, m *setMember) []*setMember {
	var out []*setMember
	for _, o := range ms {
		if o != m {
			out = append(out, o)
		}
	}
	return out
}

// TestReplicatedSetLostMajority loses two of a set's three members for
// good (killed, their disks wiped) and brings the set back as docs/replication.md
// describes: the survivor is started once with --recover-membership and
// itself alone as --peers, leads a set of one, takes sends, and two new
// members join it. Every acknowledged message, before and after, is on
// every member.
func TestReplicatedSetLostMajority(t *testing.T) {
	ns := startNamesrv(t)
	rs := startSet(t, "set-l", 3, []string{ns.NamesrvAddr})
	const topic = "Majority"
	createSetTopic(t, rs, ns.NamesrvAddr, topic)
	acked := map[string]bool{}
	send := func(step string, n int) { t.Helper(); sendEach(t, ns.NamesrvAddr, topic, step, n, acked) }

	send("before", 100)
	rs.converged()
	survivor := rs.leader()
	for _, m := range rs.members {
		if m != survivor {
			rs.kill(m, syscall.SIGKILL)
		}
	}
	rs.kill(survivor, syscall.SIGTERM)
	rs.members = []*setMember{survivor}
	survivor.args = memberArgs(rs, survivor, rs.members, ns.NamesrvAddr, "--recover-membership")
	rs.start(survivor)
	if rs.leader() != survivor {
		t.Fatal("the recovered survivor does not lead")
	}
	send("alone", 50)

	// The set grows back to three with new members; the survivor runs on
	// without the recovery flag from its next start.
	for i := range 2 {
		m := newMember(t, fmt.Sprintf("set-l-new%d", i))
		m.args = memberArgs(rs, m, append(rs.members, m), ns.NamesrvAddr, "--join")
		rs.start(m)
		st, _ := survivor.status()
		if code, out, errs := runCmd("admin", "--broker", st.Serving, "cluster", "add-member", "--id", m.id, "--raft-addr", m.raftAddr); code != 0 {
			t.Fatalf("add-member %s: exit %d: %s%s", m.id, code, out, errs)
		}
		rs.members = append(rs.members, m)
	}
	rs.converged()
	send("three", 50)

	rs.checkStoredOnce(topic, acked, true)
}

// createSetTopic creates topic with two queues on the set's cluster once
// the set has a master.
func createSetTopic(t *testing.T, rs *replicatedSet, namesrv, topic string, flags ...string) {
	t.Helper()
	rs.leader()
	brokertest.Eventually(t, 30*time.Second, "the topic created", func() bool {
		code, _, _ := runCmd(append([]string{"admin", "topics", "create", "--topic", topic, "--namesrv", namesrv, "--cluster", "DefaultCluster",
			"--read-queues", "2", "--write-queues", "2"}, flags...)...)
		return code == 0
	})
}

// sendEach sends n messages, step-0 to step-(n-1), to topic with an
// official producer of its own, each tried until it is acknowledged, and
// records them in acked. A route still naming a master that just stepped
// down fails a send or two; the retries and the next route refresh carry
// on.
func sendEach(t *testing.T, namesrv, topic, step string, n int, acked map[string]bool) {
	t.Helper()
	p := startSetProducer(t, namesrv, "send-"+step, 2, 5*time.Second)
	defer p.Shutdown()
	for i := range n {
		body := fmt.Sprintf("%s-%d", step, i)
		brokertest.Eventually(t, 30*time.Second, "send "+body, func() bool {
			res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)))
			return err == nil && res.Status == primitive.SendOK
		})
		acked[body] = true
	}
}

// memberArgs are the flags of member m of rs whose set is peers.
func memberArgs(rs *replicatedSet, m *setMember, peers []*setMember, namesrv string, extra ...string) []string {
	var ps []string
	for _, o := range peers {
		ps = append(ps, o.id+"="+o.raftAddr)
	}
	return append([]string{"--set-name", rs.name, "--node-id", m.id, "--peers", strings.Join(ps, ","),
		"--data-dir", m.dataDir, "--listen", m.listen, "--namesrv-listen", "", "--grpc-listen", "",
		"--namesrv", namesrv, "--http-listen", "127.0.0.1:0", "--log-level", "info"}, extra...)
}

// startSetProducer starts an official producer on namesrv, named after
// instance, with retry retries and timeout per send; the caller shuts it
// down.
func startSetProducer(t *testing.T, namesrv, instance string, retry int, timeout time.Duration) rocketmq.Producer {
	t.Helper()
	p, err := producer.NewDefaultProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{namesrv})),
		producer.WithInstanceName(brokertest.Name(instance)),
		producer.WithRetry(retry),
		producer.WithSendMsgTimeout(timeout),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkStoredOnce stops the set and checks that every member holds each
// acknowledged message of topic once, read by queue offset (storedBodies);
// exact also refuses messages stored without an acknowledgement, which
// only a send whose answer was lost with a killed master may leave.
func (rs *replicatedSet) checkStoredOnce(topic string, acked map[string]bool, exact bool) {
	t := rs.t
	t.Helper()
	got := rs.storedBodies(topic)
	t.Logf("%d messages acknowledged, %d stored on each of %d members", len(acked), len(got), len(rs.members))
	failed := t.Failed()
	for body := range acked {
		if got[body] != 1 {
			t.Errorf("acknowledged %s is stored %d times on the members", body, got[body])
		}
	}
	for body, k := range got {
		if k != 1 {
			t.Errorf("%s is stored %d times on the members", body, k)
		}
	}
	if exact && len(got) != len(acked) {
		t.Errorf("the members hold %d messages, %d were acknowledged", len(got), len(acked))
	}
	if !failed && t.Failed() {
		rs.reportLogs()
		rs.keepStores()
	}
}
