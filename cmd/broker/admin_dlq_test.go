package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestAdminDLQ lists and resends dead letters with "broker admin dlq".
func TestAdminDLQ(t *testing.T) {
	env := brokertest.Start(t)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	group := brokertest.Name("cg")
	env.KnowGroup(t, group)
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: "Orders", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	// A retry past its limit, sent as the client's fallback does, goes
	// straight to the dead-letter topic.
	for _, id := range []string{"M1", "M2"} {
		req := remoting.NewRequest(remoting.SendMessage, map[string]string{
			"producerGroup": "p", "topic": broker.RetryGroupTopicPrefix + group, "queueId": "0", "sysFlag": "0",
			"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0", "reconsumeTimes": "17", "maxReconsumeTimes": "16",
			"properties": string(message.EncodeProperties(map[string]string{"UNIQ_KEY": id, "RETRY_TOPIC": "Orders", "TAGS": "tag-" + id})),
		}, []byte("body-"+id))
		if resp, err := cl.Invoke(context.Background(), env.BrokerAddr, req); err != nil || resp.Code != 0 {
			t.Fatalf("send: %v %v", resp, err)
		}
	}
	code, out, errs := runCmd("admin", "--broker", env.BrokerAddr, "dlq", "list", "--group", group)
	if code != 0 || !strings.Contains(out, "M1") || !strings.Contains(out, "M2") || !strings.Contains(out, "Orders") {
		t.Fatalf("dlq list: %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCmd("admin", "--broker", env.BrokerAddr, "dlq", "list", "--group", group, "--msg-id", "M2")
	if code != 0 || strings.Contains(out, "M1") || !strings.Contains(out, "tag-M2") {
		t.Fatalf("dlq list by id: %d\n%s\n%s", code, out, errs)
	}
	if code, _, errs := runCmd("admin", "--broker", env.BrokerAddr, "dlq", "resend", "--group", group); code != 2 || !strings.Contains(errs, "--all") {
		t.Fatalf("resend without a selection: %d %s", code, errs)
	}
	code, out, errs = runCmd("admin", "--broker", env.BrokerAddr, "dlq", "resend", "--group", group, "--msg-id", "M1", "--to", "origin")
	if code != 0 || !strings.Contains(out, "M1") || !strings.Contains(out, "Orders") {
		t.Fatalf("dlq resend: %d\n%s\n%s", code, out, errs)
	}
	if n := env.Store.MaxOffset("Orders", 0); n != 1 {
		t.Fatalf("Orders holds %d messages after the resend, want 1", n)
	}
	if code, _, errs := runCmd("admin", "--broker", env.BrokerAddr, "dlq", "list"); code != 2 || !strings.Contains(errs, "--group") {
		t.Fatalf("list without a group: %d %s", code, errs)
	}
}
