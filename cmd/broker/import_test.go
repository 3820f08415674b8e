package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

const apacheFixture = "../../internal/apacheimport/testdata/apache5"

// TestImportFromApache imports the fixture of an Apache broker's files
// into a running broker that already holds some messages of TopicTest:
// the topics and groups are created (Apache's own skipped), offsets the
// broker holds are set as they are and the others clamped, and the
// mapped config passes "broker config check". A second run changes
// nothing, and a dry run before them changed nothing either.
func TestImportFromApache(t *testing.T) {
	env := brokertest.Start(t)
	admin := adminRunner(env)
	if code, _, errs := admin("topics", "create", "--topic", "TopicTest", "--read-queues", "4", "--write-queues", "4"); code != 0 {
		t.Fatalf("create TopicTest: %s", errs)
	}
	cl := remoting.NewClient(remoting.ClientOptions{Logger: slog.New(slog.DiscardHandler)})
	defer cl.Close()
	s := &adminSession{cl: cl, broker: env.BrokerAddr}
	// TopicBatch has no message type in Apache's file: the import clears
	// the one the broker holds.
	if _, err := s.invoke(context.Background(), env.BrokerAddr, remoting.UpdateAndCreateTopic, map[string]string{"topic": "TopicBatch",
		"readQueueNums": "2", "writeQueueNums": "2", "perm": "6", "attributes": "+message.type=FIFO"}, nil); err != nil {
		t.Fatal(err)
	}
	p := env.Producer(t)
	perQueue := map[int32]int64{}
	for range 16 {
		res, err := p.SendSync(context.Background(), primitive.NewMessage("TopicTest", []byte("m")))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send: %v %v", res, err)
		}
		perQueue[int32(res.MessageQueue.QueueId)]++
	}
	if perQueue[1] < 2 {
		t.Fatalf("queue 1 holds %d messages, the test wants at least 2: %v", perQueue[1], perQueue)
	}

	conf := filepath.Join(apacheFixture, "broker.conf")
	code, out, errs := runCmd("import", "--from", apacheFixture, "--broker-conf", conf, "--broker", env.BrokerAddr, "--dry-run")
	if code != 0 || !strings.Contains(out, "dry run") || !strings.Contains(out, "TopicTest@please_rename_unique_group_name_4 queue 0  250") {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errs)
	}
	if _, ok := env.Broker.Topics()["OrderTopic"]; ok {
		t.Fatal("the dry run created OrderTopic")
	}

	yamlFile := filepath.Join(t.TempDir(), "broker.yaml")
	code, out, errs = runCmd("import", "--from", apacheFixture, "--broker-conf", conf, "--out", yamlFile, "--broker", env.BrokerAddr)
	if code != 0 {
		t.Fatalf("import: exit %d\n%s%s", code, out, errs)
	}
	for _, want := range []string{"topic  OrderTopic", "created: 8 read, 8 write queues, perm 6 (RW), ordered", "unchanged: 4 read, 4 write queues", "updated: 2 read, 2 write queues, perm 6 (RW) (was 2 read, 2 write queues, perm 6 (RW), FIFO)", "group  GID_orders",
		"TBW102", "SCHEDULE_TOPIC_XXXX", "TOOLS_CONSUMER", "Apache's system group", "CLAMPED", "delay offsets", "sendMessageThreadPoolNums=16", "written to " + yamlFile} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q", want)
		}
	}

	topics := env.Broker.Topics()
	for name, want := range map[string]struct {
		queues int
		order  bool
		mtype  string
	}{"OrderTopic": {8, true, ""}, "TopicFifo": {4, false, "FIFO"}, "TopicTest": {4, false, ""}, "TopicBatch": {2, false, ""}} {
		tc, ok := topics[name]
		if !ok || tc.ReadQueueNums != want.queues || tc.WriteQueueNums != want.queues || tc.Order != want.order || tc.MessageType != want.mtype || tc.Perm != 6 {
			t.Errorf("topic %s: %+v (held %v)", name, tc, ok)
		}
	}
	for _, name := range []string{"SCHEDULE_TOPIC_XXXX", "SELF_TEST_TOPIC", "broker-a", "DefaultCluster", "BenchmarkTest", "RMQ_SYS_TRANS_HALF_TOPIC"} {
		if _, ok := topics[name]; ok {
			t.Errorf("Apache's system topic %s was created", name)
		}
	}

	var groups []groupRow
	adminJSON(t, admin, &groups, "groups", "list")
	held := map[string]broker.SubscriptionGroupConfig{}
	for _, g := range groups {
		held[g.GroupName] = g.SubscriptionGroupConfig
	}
	if g, ok := held["GID_orders"]; !ok || g.ConsumeBroadcastEnable || g.RetryMaxTimes != 5 || g.GroupRetryPolicy == nil ||
		g.GroupRetryPolicy.Type != broker.RetryPolicyExponential || g.GroupRetryPolicy.ExponentialRetryPolicy.Initial != 1000 {
		t.Errorf("GID_orders: %+v", g)
	}
	if g, ok := held["GID_fifo"]; !ok || !g.ConsumeMessageOrderly {
		t.Errorf("GID_fifo: %+v", g)
	}
	for _, name := range []string{"TOOLS_CONSUMER", "CID_ONSAPI_PULL", "CID_RMQ_SYS_TRANS", "SELF_TEST_C_GROUP"} {
		if _, ok := held[name]; ok {
			t.Errorf("Apache's system group %s was created", name)
		}
	}

	// Offsets, as a consumer asks for them.
	offset := func(group, topic string, q int) int64 {
		t.Helper()
		resp, err := s.invoke(context.Background(), env.BrokerAddr, remoting.QueryConsumerOffset,
			map[string]string{"consumerGroup": group, "topic": topic, "queueId": strconv.Itoa(q)}, nil)
		if err != nil {
			t.Fatalf("%s@%s queue %d: %v", topic, group, q, err)
		}
		n, _ := strconv.ParseInt(resp.Get("offset"), 10, 64)
		return n
	}
	const pr = "please_rename_unique_group_name_4"
	if got := offset(pr, "TopicTest", 1); got != 2 {
		t.Errorf("TopicTest@%s queue 1: %d, want Apache's 2, which the broker holds", pr, got)
	}
	for _, q := range []int{0, 2, 3} {
		if got := offset(pr, "TopicTest", q); got != perQueue[int32(q)] {
			t.Errorf("TopicTest@%s queue %d: %d, want Apache's 250 clamped to the %d held", pr, q, got, perQueue[int32(q)])
		}
	}
	if got := offset("GID_orders", "OrderTopic", 0); got != 0 {
		t.Errorf("OrderTopic@GID_orders queue 0: %d, want 12 clamped to an empty queue's 0", got)
	}
	if !reportLine(out, "OrderTopic@GID_orders queue 0 ", "CLAMPED: Apache's 12 is outside the 0..0 this broker holds; set to 0") ||
		!reportLine(out, "TopicTest@"+pr+" queue 1 ", "set to 2") {
		t.Errorf("the report does not say OrderTopic's offset was clamped:\n%s", out)
	}

	y, err := os.ReadFile(yamlFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(y), "clusterName: DefaultCluster\n") || !strings.Contains(string(y), "  flush: async\n") {
		t.Errorf("config file:\n%s", y)
	}
	if problems := server.CheckFile(yamlFile); len(problems) > 0 {
		t.Errorf("broker config check: %v\n%s", problems, y)
	}

	// Again: everything is there already.
	code, out, errs = runCmd("import", "--from", apacheFixture, "--broker", env.BrokerAddr)
	if code != 0 || strings.Contains(out, "created:") || strings.Contains(out, "updated:") || !strings.Contains(out, "unchanged") {
		t.Fatalf("second import: exit %d\n%s%s", code, out, errs)
	}
}

// reportLine reports whether a line of the report holds both parts.
func reportLine(report, a, b string) bool {
	for _, l := range strings.Split(report, "\n") {
		if strings.Contains(l, a) && strings.Contains(l, b) {
			return true
		}
	}
	return false
}

// TestImportUnreadable: a file that does not decode stops the import
// before anything is changed, and bad flags are usage errors.
func TestImportUnreadable(t *testing.T) {
	env := brokertest.Start(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "subscriptionGroup.json"), []byte(`{"subscriptionGroupTable":{"GID_new":{"groupName":"GID_new"}}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "consumerOffset.json"), []byte("{\"offsetTable\":{\"t@GID_new\":{0:"), 0o644)
	code, _, errs := runCmd("import", "--from", dir, "--broker", env.BrokerAddr)
	if code != 1 || !strings.Contains(errs, "consumerOffset.json") || !strings.Contains(errs, "nothing was imported") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var groups []groupRow
	adminJSON(t, adminRunner(env), &groups, "groups", "list")
	for _, g := range groups {
		if g.GroupName == "GID_new" {
			t.Fatal("GID_new was created from a directory whose consumerOffset.json does not decode")
		}
	}
	if code, _, errs := runCmd("import", "--from", t.TempDir(), "--broker", env.BrokerAddr); code != 1 || !strings.Contains(errs, "no Apache RocketMQ config files") {
		t.Fatalf("empty directory: exit %d: %s", code, errs)
	}
	for _, args := range [][]string{{"import"}, {"import", "--from", dir, "--out", "x.yaml"}, {"import", "--from", dir, "extra"}} {
		if code, _, _ := runCmd(args...); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	if code, _, _ := runCmd("import", "-h"); code != 0 {
		t.Errorf("-h: exit %d", code)
	}
}

// TestImportDocRuns runs the commands of docs/operations.md's "Coming
// from Apache RocketMQ" as written, with the fixture's files in place of
// /opt/rocketmq's, a temporary broker.yaml and a test broker's address.
func TestImportDocRuns(t *testing.T) {
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## Coming from Apache RocketMQ\n")
	if !ok {
		t.Fatal(`docs/operations.md has no "Coming from Apache RocketMQ"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		t.Fatal("the section has no shell block")
	}
	block, _, _ = strings.Cut(block, "```")

	env := brokertest.Start(t)
	yamlFile := filepath.Join(t.TempDir(), "broker.yaml")
	fixture, _ := filepath.Abs(apacheFixture)
	repl := strings.NewReplacer("/opt/rocketmq/store/config", filepath.Join(fixture, "config"),
		"/opt/rocketmq/conf/broker.conf", filepath.Join(fixture, "broker.conf"), "127.0.0.1:10911", env.BrokerAddr)
	ran := 0
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(line, "broker ") {
			continue
		}
		var args []string
		for _, f := range strings.Fields(repl.Replace(line))[1:] {
			switch f {
			case `""`:
				f = ""
			case "broker.yaml":
				f = yamlFile
			}
			args = append(args, f)
		}
		if code, out, errs := runCmd(args...); code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", line, code, out, errs)
		}
		ran++
	}
	if ran != 4 {
		t.Fatalf("ran %d commands of the section, want 4", ran)
	}
	if _, ok := env.Broker.Topics()["OrderTopic"]; !ok {
		t.Fatal("the documented import did not create OrderTopic")
	}
}

// TestImportWithACL: under access control an unsigned import is refused
// before anything is changed, and one signed with an admin account
// imports.
func TestImportWithACL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "broker.yaml")
	yml := "acl:\n  enabled: true\n  accounts:\n    - {accessKey: importAdmin, secretKey: importAdminSecret, admin: true}\n"
	if err := os.WriteFile(path, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	env := brokertest.Start(t, func(c *server.Config) {
		if err := c.ReadFile(path); err != nil {
			t.Fatal(err)
		}
		c.ACLSource = server.ACLFile(path)
	})
	code, _, errs := runCmd("import", "--from", apacheFixture, "--broker", env.BrokerAddr)
	if code != 1 || !strings.Contains(errs, "NO_PERMISSION") || !strings.Contains(errs, "nothing was changed on the broker") {
		t.Fatalf("unsigned: exit %d: %s", code, errs)
	}
	if _, ok := env.Broker.Topics()["OrderTopic"]; ok {
		t.Fatal("an unsigned import created OrderTopic")
	}
	code, out, errs := runCmd("import", "--from", apacheFixture, "--broker", env.BrokerAddr, "--access-key", "importAdmin", "--secret-key", "importAdminSecret")
	if code != 0 {
		t.Fatalf("signed: exit %d\n%s%s", code, out, errs)
	}
	if _, ok := env.Broker.Topics()["OrderTopic"]; !ok {
		t.Fatal("a signed import did not create OrderTopic")
	}
}
