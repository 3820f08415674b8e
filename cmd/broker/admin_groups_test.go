package main

import (
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestAdminGroups creates, changes, lists and deletes a consumer group's
// configuration; the delete takes the group's retry and dead-letter topics
// with it, on the broker and the name server.
func TestAdminGroups(t *testing.T) {
	env := brokertest.Start(t)
	admin := adminRunner(env)
	group := brokertest.Name("cg")

	var rows []broker.SubscriptionGroupConfig
	adminJSON(t, admin, &rows, "groups", "create", "--group", group, "--retry-queues", "2", "--retry-max", "3", "--broadcast=false")
	if len(rows) != 1 || rows[0].GroupName != group || rows[0].RetryQueueNums != 2 || rows[0].RetryMaxTimes != 3 || rows[0].ConsumeBroadcastEnable || !rows[0].ConsumeEnable || rows[0].AutoCreated {
		t.Fatalf("create: %+v", rows)
	}
	if code, _, errs := admin("groups", "create", "--group", group); code != 1 || !strings.Contains(errs, "has a configuration") {
		t.Fatalf("create twice: %d %s", code, errs)
	}
	adminJSON(t, admin, &rows, "groups", "update", "--group", group, "--retry-max", "5", "--consume=false")
	if len(rows) != 1 || rows[0].RetryQueueNums != 2 || rows[0].RetryMaxTimes != 5 || rows[0].ConsumeBroadcastEnable || rows[0].ConsumeEnable {
		t.Fatalf("update --retry-max 5 --consume=false: %+v", rows)
	}
	rows = nil // a field absent from the answer would keep what it held
	adminJSON(t, admin, &rows, "groups", "update", "--group", group, "--attributes", "+priority.factor=40")
	if len(rows) != 1 || rows[0].Attributes["priority.factor"] != "40" || rows[0].RetryMaxTimes != 5 {
		t.Fatalf("update --attributes +priority.factor=40: %+v", rows)
	}
	rows = nil
	adminJSON(t, admin, &rows, "groups", "update", "--group", group, "--orderly")
	if len(rows) != 1 || !rows[0].ConsumeMessageOrderly || rows[0].Attributes["priority.factor"] != "40" {
		t.Fatalf("update --orderly: %+v", rows)
	}
	rows = nil
	adminJSON(t, admin, &rows, "groups", "update", "--group", group, "--retry-max", "6")
	if len(rows) != 1 || rows[0].Attributes["priority.factor"] != "40" || !rows[0].ConsumeMessageOrderly {
		t.Fatalf("an update without --attributes or --orderly dropped them: %+v", rows)
	}
	for _, bad := range []struct{ attrs, want string }{
		{"+priority.factor=101", "0..100"}, {"+urgency=1", `unknown attribute "urgency"`},
	} {
		if code, _, errs := admin("groups", "update", "--group", group, "--attributes", bad.attrs); code != 1 || !strings.Contains(errs, bad.want) {
			t.Fatalf("--attributes %s: %d %s", bad.attrs, code, errs)
		}
	}
	if code, _, errs := admin("groups", "update", "--group", group, "--attributes", "priority.factor=1"); code != 2 || !strings.Contains(errs, "+name=value") {
		t.Fatalf("--attributes without + or -: %d %s", code, errs)
	}
	code, out, errs := admin("groups", "list")
	if code != 0 || !strings.Contains(out, group) || !strings.Contains(out, "MAX RETRIES") || !strings.Contains(out, "ORDERLY") || !strings.Contains(out, "priority.factor=40") {
		t.Fatalf("list: %d\n%s%s", code, out, errs)
	}

	rows = nil
	adminJSON(t, admin, &rows, "groups", "update", "--group", group, "--attributes", "-priority.factor")
	if len(rows) != 1 || len(rows[0].Attributes) != 0 {
		t.Fatalf("update --attributes -priority.factor: %+v", rows)
	}

	env.KnowGroup(t, group) // its retry topic
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: broker.DLQGroupTopicPrefix + group, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	code, out, errs = admin("groups", "delete", "--group", group, "--namesrv", env.NamesrvAddr)
	if code != 0 || strings.Count(out, "deleted") != 5 || !strings.Contains(out, "%RETRY%"+group) || !strings.Contains(out, "%DLQ%"+group) {
		t.Fatalf("delete: %d\n%s%s", code, out, errs)
	}
	for _, topic := range []string{broker.RetryGroupTopicPrefix + group, broker.DLQGroupTopicPrefix + group} {
		if _, ok := env.Broker.Topics()[topic]; ok {
			t.Fatalf("%s survived the group's deletion", topic)
		}
	}
	adminJSON(t, admin, &rows, "groups", "list")
	for _, gc := range rows {
		if gc.GroupName == group {
			t.Fatalf("%s listed after its deletion", group)
		}
	}
	if code, _, errs := admin("groups", "delete"); code != 2 || !strings.Contains(errs, "--group required") {
		t.Fatalf("no group: %d %s", code, errs)
	}
}
