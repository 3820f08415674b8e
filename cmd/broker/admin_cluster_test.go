package main

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// TestAdminClusterList lists the name server's broker with its figures
// after an official producer stored messages.
func TestAdminClusterList(t *testing.T) {
	env := brokertest.Start(t)
	admin := adminRunner(env)
	topic := brokertest.Name("T")
	p := env.Producer(t)
	const n = 3
	for i := 0; i < n; i++ {
		if res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("m"))); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send: %v %v", res, err)
		}
	}

	var rows []clusterBroker
	adminJSON(t, admin, &rows, "cluster", "list", "--namesrv", env.NamesrvAddr)
	if len(rows) != 1 {
		t.Fatalf("cluster list: %+v", rows)
	}
	b := rows[0]
	if b.Cluster != broker.DefaultClusterName || b.BrokerName != broker.DefaultBrokerName || b.BrokerID != 0 || b.Addr != env.BrokerAddr ||
		b.Version != "V4_9_8" || b.Topics != len(env.Broker.Topics()) || b.Connections < 2 || b.MsgPutTotal < n || b.BootTimestamp <= 0 || b.Error != "" {
		t.Fatalf("cluster list: %+v", b)
	}
	code, out, errs := admin("cluster", "list", "--namesrv", env.NamesrvAddr)
	if code != 0 || !strings.Contains(out, env.BrokerAddr) || !strings.Contains(out, broker.DefaultClusterName) || !strings.Contains(out, "UPTIME") {
		t.Fatalf("cluster list table: %d\n%s%s", code, out, errs)
	}

	// Without a name server: the broker at --broker alone.
	adminJSON(t, admin, &rows, "cluster", "list", "--namesrv", "")
	if len(rows) != 1 || rows[0].Addr != env.BrokerAddr || rows[0].Cluster != "" || rows[0].Topics != b.Topics {
		t.Fatalf("cluster list without a name server: %+v", rows)
	}
	// A broker that does not answer is listed, and the exit code says so.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	code, out, errs = runCmd("admin", "--broker", dead, "cluster", "list", "--namesrv", "")
	if code != 1 || !strings.Contains(out, "unreachable") || !strings.Contains(errs, dead) {
		t.Fatalf("a dead broker: %d\n%s%s", code, out, errs)
	}
}

// TestAdminTwoBrokers runs two brokers on one name server: cluster list
// shows both, and topics status and consumers progress with --all add up
// the queues of every broker of the route, as mqadmin does.
func TestAdminTwoBrokers(t *testing.T) {
	a := brokertest.Start(t)
	b := brokertest.Start(t, func(c *server.Config) {
		c.NamesrvListen = ""
		c.NameServers = []string{a.NamesrvAddr}
		c.Broker.BrokerName = "broker-b"
		c.GRPCListen = "127.0.0.1:0"
	})
	admin := adminRunner(a)
	topic, group := brokertest.Name("T"), brokertest.Name("cg")
	var created []topicRow
	adminJSON(t, admin, &created, "topics", "create", "--topic", topic, "--read-queues", "2", "--write-queues", "2", "--cluster", broker.DefaultClusterName, "--namesrv", a.NamesrvAddr)
	if len(created) != 2 || created[0].Addr == created[1].Addr || created[0].ReadQueueNums != 2 || created[1].WriteQueueNums != 2 {
		t.Fatalf("create --cluster: %+v", created)
	}
	for _, env := range []*brokertest.Env{a, b} {
		if _, ok := env.Broker.Topics()[topic]; !ok {
			t.Fatalf("create --cluster: not on %s", env.BrokerAddr)
		}
	}
	if code, _, errs := admin("topics", "create", "--topic", topic, "--cluster", "NoSuchCluster", "--namesrv", a.NamesrvAddr); code != 1 || !strings.Contains(errs, "NoSuchCluster") {
		t.Fatalf("create on an unknown cluster: %d %s", code, errs)
	}
	var cluster []clusterBroker
	adminJSON(t, admin, &cluster, "cluster", "list", "--namesrv", a.NamesrvAddr)
	if len(cluster) != 2 || cluster[0].BrokerName != broker.DefaultBrokerName || cluster[1].BrokerName != "broker-b" || cluster[1].Addr != b.BrokerAddr ||
		cluster[0].GRPCAddr != "" || cluster[1].GRPCAddr != b.GRPCAddr {
		t.Fatalf("cluster list: %+v", cluster)
	}
	if code, out, errs := admin("cluster", "list", "--namesrv", a.NamesrvAddr); code != 0 || !strings.Contains(out, "GRPC") || !strings.Contains(out, b.GRPCAddr) {
		t.Fatalf("cluster list table: %d\n%s%s", code, out, errs)
	}

	p := a.Producer(t)
	send := func(n int) {
		for i := 0; i < n; i++ {
			if res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("m"))); err != nil || res.Status != primitive.SendOK {
				t.Fatalf("send: %v %v", res, err)
			}
		}
	}
	const consumed, notConsumed = 12, 5
	send(consumed)
	var status []queueStatus
	adminJSON(t, admin, &status, "topics", "status", "--topic", topic, "--all", "--namesrv", a.NamesrvAddr)
	brokers, total := map[string]bool{}, int64(0)
	for _, q := range status {
		brokers[q.BrokerName] = true
		total += q.MaxOffset
	}
	if len(status) != 4 || len(brokers) != 2 || total != consumed {
		t.Fatalf("status --all: %+v", status)
	}
	adminJSON(t, admin, &status, "topics", "status", "--topic", topic)
	if len(status) != 2 || status[0].BrokerName != broker.DefaultBrokerName {
		t.Fatalf("status of one broker: %+v", status)
	}

	c := startLitePull(t, a, group, topic)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for got := 0; got < consumed; {
		msgs, err := c.Poll(ctx)
		if err != nil || ctx.Err() != nil {
			t.Fatalf("polled %d of %d: %v", got, consumed, err)
		}
		got += len(msgs)
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	send(notConsumed)
	var g groupProgress
	adminJSON(t, admin, &g, "consumers", "progress", "--group", group, "--topic", topic, "--all", "--namesrv", a.NamesrvAddr)
	if len(g.Queues) != 4 || g.ConsumerOffset != consumed || g.Lag != notConsumed {
		t.Fatalf("progress --all: %+v", g)
	}
	if code, _, errs := admin("consumers", "progress", "--all"); code != 2 || !strings.Contains(errs, "--all needs --group") {
		t.Fatalf("--all without a group: %d %s", code, errs)
	}

	adminJSON(t, admin, &created, "topics", "update", "--topic", topic, "--perm", "R", "--cluster", broker.DefaultClusterName, "--namesrv", a.NamesrvAddr)
	if len(created) != 2 || created[0].Perm != 4 || created[1].Perm != 4 || created[1].ReadQueueNums != 2 {
		t.Fatalf("update --cluster: %+v", created)
	}
	code, out, errs := admin("topics", "delete", "--topic", topic, "--cluster", broker.DefaultClusterName, "--namesrv", a.NamesrvAddr)
	if code != 0 || strings.Count(out, "deleted") != 3 || !strings.Contains(out, b.BrokerAddr) {
		t.Fatalf("delete --cluster: %d\n%s%s", code, out, errs)
	}
	for _, env := range []*brokertest.Env{a, b} {
		if _, ok := env.Broker.Topics()[topic]; ok {
			t.Fatalf("delete --cluster: still on %s", env.BrokerAddr)
		}
	}
	if code, _, errs := admin("topics", "route", "--topic", topic, "--namesrv", a.NamesrvAddr); code != 1 || !strings.Contains(errs, "TOPIC_NOT_EXIST") {
		t.Fatalf("route after delete --cluster: %d %s", code, errs)
	}

	g2 := brokertest.Name("cg")
	var groups []groupRow
	adminJSON(t, admin, &groups, "groups", "create", "--group", g2, "--retry-max", "2", "--cluster", broker.DefaultClusterName, "--namesrv", a.NamesrvAddr)
	if len(groups) != 2 || groups[0].Addr == groups[1].Addr || groups[0].RetryMaxTimes != 2 || groups[1].RetryMaxTimes != 2 {
		t.Fatalf("groups create --cluster: %+v", groups)
	}
	a.KnowGroup(t, g2)
	b.KnowGroup(t, g2)
	code, out, errs = admin("groups", "delete", "--group", g2, "--cluster", broker.DefaultClusterName, "--namesrv", a.NamesrvAddr)
	if code != 0 || strings.Count(out, "deleted") != 5 {
		t.Fatalf("groups delete --cluster: %d\n%s%s", code, out, errs)
	}
	for _, env := range []*brokertest.Env{a, b} {
		if _, ok := env.Broker.Topics()[broker.RetryGroupTopicPrefix+g2]; ok {
			t.Fatalf("groups delete --cluster: the retry topic is still on %s", env.BrokerAddr)
		}
		adminJSON(t, adminRunner(env), &groups, "groups", "list")
		if slices.ContainsFunc(groups, func(r groupRow) bool { return r.GroupName == g2 }) {
			t.Fatalf("groups delete --cluster: %s still on %s", g2, env.BrokerAddr)
		}
	}
}

// TestPrintClusterStatus prints a set's members as cluster status does,
// each with how far back its raft log reaches and its gRPC address, and
// an unreachable one as such.
func TestPrintClusterStatus(t *testing.T) {
	var rows []setMemberRow
	var lead setMemberRow
	lead.HTTP, lead.Set, lead.Node, lead.State, lead.Leader, lead.Serving, lead.GRPC = "127.0.0.1:8080", "set-a", "n1", "Leader", "n1", "127.0.0.1:10911", "127.0.0.1:8081"
	lead.LogSpan = "26h3m7s"
	rows = append(rows, lead, setMemberRow{HTTP: "127.0.0.1:8090", Error: "connection refused"})
	var sb strings.Builder
	if err := printClusterStatus(&sb, rows); err != nil {
		t.Fatal(err)
	}
	out := sb.String()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasSuffix(strings.TrimSpace(lines[0]), "GRPC") ||
		!strings.Contains(lines[1], "Leader (master at 127.0.0.1:10911)") || !strings.HasSuffix(strings.Join(strings.Fields(lines[1]), " "), "26h3m7s 127.0.0.1:8081") ||
		!strings.Contains(lines[2], "unreachable") {
		t.Fatalf("cluster status table:\n%s", out)
	}
}
