package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// adminRunner runs "broker admin" against env's broker.
func adminRunner(env *brokertest.Env) func(args ...string) (int, string, string) {
	return func(args ...string) (int, string, string) {
		return runCmd(append([]string{"admin", "--broker", env.BrokerAddr}, args...)...)
	}
}

// adminJSON runs a command with --json, which must succeed, and decodes
// its answer into v.
func adminJSON(t *testing.T, admin func(args ...string) (int, string, string), v any, args ...string) {
	t.Helper()
	code, out, errs := admin(append(args, "--json")...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v: %v in %q", args, err, out)
	}
}

// TestAdminTopics creates a topic, reads its route from the name server,
// sends to it with the official client and reads its queue offsets,
// changes it, and deletes it from the broker and the name server.
func TestAdminTopics(t *testing.T) {
	env := brokertest.Start(t)
	admin := adminRunner(env)
	topic := brokertest.Name("T")

	code, out, errs := admin("topics", "create", "--topic", topic, "--read-queues", "4", "--write-queues", "4")
	if code != 0 || !strings.Contains(out, topic) || !strings.Contains(out, "6 (RW)") {
		t.Fatalf("create: %d\n%s%s", code, out, errs)
	}
	if code, _, errs := admin("topics", "create", "--topic", topic); code != 1 || !strings.Contains(errs, "exists") {
		t.Fatalf("create twice: %d %s", code, errs)
	}

	var route []routeRow
	adminJSON(t, admin, &route, "topics", "route", "--topic", topic, "--namesrv", env.NamesrvAddr)
	if len(route) != 1 || route[0].Addr != env.BrokerAddr || route[0].BrokerID != 0 || route[0].ReadQueueNums != 4 || route[0].WriteQueueNums != 4 || route[0].Perm != 6 {
		t.Fatalf("route: %+v (broker %s)", route, env.BrokerAddr)
	}
	if code, out, _ := admin("topics", "route", "--topic", topic, "--namesrv", env.NamesrvAddr); code != 0 || !strings.Contains(out, env.BrokerAddr) {
		t.Fatalf("route table: %d\n%s", code, out)
	}

	p := env.Producer(t)
	perQueue := map[int32]int64{}
	const n = 10
	for i := 0; i < n; i++ {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("m")))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send: %v %v", res, err)
		}
		perQueue[int32(res.MessageQueue.QueueId)]++
	}
	var status []queueStatus
	adminJSON(t, admin, &status, "topics", "status", "--topic", topic)
	if len(status) != 4 {
		t.Fatalf("status: %d queues, want 4: %+v", len(status), status)
	}
	for _, q := range status {
		if q.MinOffset != 0 || q.MaxOffset != perQueue[q.QueueID] || (q.MaxOffset > 0) != (q.LastUpdateTimestamp > 0) {
			t.Fatalf("status of queue %d: %+v, sent %d", q.QueueID, q, perQueue[q.QueueID])
		}
	}
	if code, out, _ := admin("topics", "status", "--topic", topic); code != 0 || !strings.Contains(out, "4 queues, 10 messages") {
		t.Fatalf("status table: %d\n%s", code, out)
	}

	var rows []topicRow
	adminJSON(t, admin, &rows, "topics", "update", "--topic", topic, "--perm", "R")
	if len(rows) != 1 || rows[0].Perm != 4 || rows[0].ReadQueueNums != 4 || rows[0].WriteQueueNums != 4 {
		t.Fatalf("update --perm R: %+v", rows)
	}
	adminJSON(t, admin, &rows, "topics", "update", "--topic", topic, "--message-type", "priority")
	if len(rows) != 1 || rows[0].MessageType != "PRIORITY" || rows[0].Perm != 4 || env.Broker.Topics()[topic].MessageType != "PRIORITY" {
		t.Fatalf("update --message-type priority: %+v", rows)
	}
	if code, out, _ := admin("topics", "list"); code != 0 || !regexp.MustCompile(topic+`\s.*\sPRIORITY\n`).MatchString(out) {
		t.Fatalf("topics list shows no type: %d\n%s", code, out)
	}
	adminJSON(t, admin, &rows, "topics", "update", "--topic", topic, "--perm", "RW")
	if len(rows) != 1 || rows[0].MessageType != "PRIORITY" {
		t.Fatalf("an update without --message-type dropped the type: %+v", rows)
	}
	rows = nil // absent from the answer, a field would keep what it held
	adminJSON(t, admin, &rows, "topics", "update", "--topic", topic, "--message-type", "")
	if len(rows) != 1 || rows[0].MessageType != "" {
		t.Fatalf(`update --message-type "": %+v`, rows)
	}
	if code, _, errs := admin("topics", "update", "--topic", topic, "--message-type", "URGENT"); code != 2 || !strings.Contains(errs, "PRIORITY") {
		t.Fatalf("an unknown message type: %d %s", code, errs)
	}
	// A LITE topic with a lite topic expiration: set, kept by an update
	// that does not name it, removed; refused for another type.
	lite := brokertest.Name("AdminLite")
	rows = nil
	adminJSON(t, admin, &rows, "topics", "create", "--topic", lite, "--read-queues", "1", "--write-queues", "1", "--message-type", "LITE", "--lite-expiration", "30m")
	if len(rows) != 1 || rows[0].MessageType != "LITE" || rows[0].LiteExpiration != 30 {
		t.Fatalf("create --message-type LITE --lite-expiration 30m: %+v", rows)
	}
	if code, out, _ := admin("topics", "list"); code != 0 || !regexp.MustCompile(lite+`\s.*\sLITE \(expire 30m0s\)\n`).MatchString(out) {
		t.Fatalf("topics list shows no lite expiration: %d\n%s", code, out)
	}
	for _, r := range env.Broker.SendLocalBatch([]broker.LocalSend{
		{Topic: lite, LiteTopic: "c", Body: []byte("1")}, {Topic: lite, LiteTopic: "a", Body: []byte("2")},
		{Topic: lite, LiteTopic: "b", Body: []byte("3")}, {Topic: lite, LiteTopic: "a", Body: []byte("4")},
	}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	var page broker.LiteTopicList
	adminJSON(t, admin, &page, "topics", "lite", "--topic", lite, "--limit", "2")
	if page.Total != 3 || len(page.Rows) != 2 || page.Rows[0].LiteTopic != "a" || page.Rows[0].MaxOffset != 2 || page.Rows[1].LiteTopic != "b" || page.Rows[0].LastWritten == 0 {
		t.Fatalf("topics lite --limit 2: %+v", page)
	}
	adminJSON(t, admin, &page, "topics", "lite", "--topic", lite, "--after", "b")
	if len(page.Rows) != 1 || page.Rows[0].LiteTopic != "c" {
		t.Fatalf("topics lite --after b: %+v", page)
	}
	if code, out, _ := admin("topics", "lite", "--topic", lite); code != 0 || !strings.Contains(out, "LITE TOPIC") || !strings.Contains(out, "3 of 3 lite topics") {
		t.Fatalf("topics lite: %d\n%s", code, out)
	}
	if code, _, errs := admin("topics", "lite", "--topic", topic); code != 1 || !strings.Contains(errs, "not of type LITE") {
		t.Fatalf("topics lite of a topic not LITE: %d %s", code, errs)
	}
	rows = nil
	adminJSON(t, admin, &rows, "topics", "update", "--topic", lite, "--perm", "RW")
	if len(rows) != 1 || rows[0].LiteExpiration != 30 {
		t.Fatalf("an update without --lite-expiration dropped it: %+v", rows)
	}
	rows = nil
	adminJSON(t, admin, &rows, "topics", "update", "--topic", lite, "--lite-expiration", "0")
	if len(rows) != 1 || rows[0].LiteExpiration != 0 || rows[0].MessageType != "LITE" {
		t.Fatalf("update --lite-expiration 0: %+v", rows)
	}
	if code, _, errs := admin("topics", "update", "--topic", topic, "--lite-expiration", "1h"); code != 1 || !strings.Contains(errs, "LITE topic's") {
		t.Fatalf("a lite expiration on a topic not LITE: %d %s", code, errs)
	}
	if code, _, errs := admin("topics", "update", "--topic", topic); code != 2 || !strings.Contains(errs, "nothing to change") {
		t.Fatalf("update without a change: %d %s", code, errs)
	}
	if code, _, errs := admin("topics", "update", "--topic", topic, "--write-queues", "9"); code != 1 || !strings.Contains(errs, "SYSTEM_ERROR (1)") {
		t.Fatalf("more write than read queues: %d %s", code, errs)
	}

	code, out, errs = admin("topics", "delete", "--topic", topic, "--namesrv", env.NamesrvAddr)
	if code != 0 || strings.Count(out, "deleted") != 2 || !strings.Contains(out, env.NamesrvAddr) {
		t.Fatalf("delete: %d\n%s%s", code, out, errs)
	}
	if code, _, errs := admin("topics", "route", "--topic", topic, "--namesrv", env.NamesrvAddr); code != 1 || !strings.Contains(errs, "TOPIC_NOT_EXIST (17)") {
		t.Fatalf("route after delete: %d %s", code, errs)
	}
	if code, _, errs := admin("topics", "status", "--topic", topic); code != 1 || !strings.Contains(errs, "TOPIC_NOT_EXIST") {
		t.Fatalf("status after delete: %d %s", code, errs)
	}
	if _, ok := env.Broker.Topics()[topic]; ok {
		t.Fatal("the broker still holds the topic")
	}
	if code, _, errs := admin("topics", "status"); code != 2 || !strings.Contains(errs, "--topic required") {
		t.Fatalf("no topic: %d %s", code, errs)
	}
}
