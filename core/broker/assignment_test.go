package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/allocate"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// queryAssignment sends QUERY_ASSIGNMENT and returns the response code,
// the assigned queue ids (sorted, "-" when the list is absent) and the
// remark.
func queryAssignment(t *testing.T, lc *lockClient, body allocate.QueryAssignmentRequest) (int16, string, string) {
	t.Helper()
	raw, _ := json.Marshal(body)
	resp := lc.invoke(remoting.NewRequest(remoting.QueryAssignment, nil, raw))
	if resp.Code != remoting.Success {
		return resp.Code, "", resp.Remark
	}
	var got allocate.QueryAssignmentResponse
	if err := json.Unmarshal(resp.Body, &got); err != nil || got.MessageQueueAssignments == nil {
		t.Fatalf("QUERY_ASSIGNMENT body %s: %v", resp.Body, err)
	}
	var ids []string
	for _, a := range got.MessageQueueAssignments {
		if a.Mode != "PULL" || a.MessageQueue.Topic != body.Topic || a.MessageQueue.BrokerName != broker.DefaultBrokerName {
			t.Fatalf("assignment %+v", a)
		}
		ids = append(ids, fmt.Sprint(a.MessageQueue.QueueID))
	}
	return resp.Code, strings.Join(ids, " "), resp.Remark
}

// TestQueryAssignment drives QUERY_ASSIGNMENT over the wire: the default
// strategy, the client's choice, the group's configured strategy (taking
// effect at once), broadcasting, a stranger and a missing topic.
func TestQueryAssignment(t *testing.T) {
	env := brokertest.Start(t)
	b := env.Broker
	topic, group := brokertest.Name("Assign"), brokertest.Name("cg_assign")
	if err := b.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 5, WriteQueueNums: 5, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	c1, c2 := newLockClient(t, env, group, "10.0.0.1@1"), newLockClient(t, env, group, "10.0.0.2@1")
	c1.heartbeat(topic)
	c2.heartbeat(topic)
	ask := func(lc *lockClient, strategy, model string) string {
		t.Helper()
		code, ids, remark := queryAssignment(t, lc, allocate.QueryAssignmentRequest{Topic: topic, ConsumerGroup: group, ClientID: lc.id, StrategyName: strategy, MessageModel: model})
		if code != remoting.Success {
			t.Fatalf("QUERY_ASSIGNMENT for %s: %d %s", lc.id, code, remark)
		}
		return ids
	}
	both := func(strategy string) string {
		t.Helper()
		return ask(c1, strategy, "CLUSTERING") + " | " + ask(c2, strategy, "CLUSTERING")
	}
	for strategy, want := range map[string]string{
		"":                              "0 1 2 | 3 4", // AVG
		"AVG":                           "0 1 2 | 3 4",
		"AllocateMessageQueueByMachine": "0 1 2 | 3 4", // unknown: AVG
		"avg_by_circle":                 "0 2 4 | 1 3",
	} {
		if got := both(strategy); got != want {
			t.Errorf("strategy %q: %s, want %s", strategy, got, want)
		}
	}

	// The group's strategy beats the client's, at once and durably.
	if _, err := b.Admin().Run(context.Background(), "consumers.strategy", json.RawMessage(`{"group":"`+group+`","strategy":"avg_by_circle"}`)); err != nil {
		t.Fatal(err)
	}
	if got := both("AVG"); got != "0 2 4 | 1 3" {
		t.Errorf("group AVG_BY_CIRCLE: %s", got)
	}
	if gs := b.View().GroupStrategy(group); gs.Configured != "AVG_BY_CIRCLE" || gs.Effective != "AVG_BY_CIRCLE" || gs.Source != broker.SourceGroup {
		t.Errorf("GroupStrategy %+v", gs)
	}
	// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP without the field keeps it; with
	// it, changes it; a bad name is refused.
	update := func(body string) *remoting.Command {
		return c1.invoke(remoting.NewRequest(remoting.UpdateAndCreateSubscriptionGroup, nil, []byte(body)))
	}
	if r := update(`{"groupName":"` + group + `","retryQueueNums":1,"retryMaxTimes":16}`); r.Code != remoting.Success || both("") != "0 2 4 | 1 3" {
		t.Errorf("update without allocateStrategy: %d %s, %s", r.Code, r.Remark, both(""))
	}
	if r := update(`{"groupName":"` + group + `","retryQueueNums":1,"retryMaxTimes":16,"allocateStrategy":"AVG"}`); r.Code != remoting.Success || both("AVG_BY_CIRCLE") != "0 1 2 | 3 4" {
		t.Errorf("update to AVG: %d %s, %s", r.Code, r.Remark, both("AVG_BY_CIRCLE"))
	}
	if r := update(`{"groupName":"` + group + `","retryQueueNums":1,"allocateStrategy":"RANDOM"}`); r.Code != remoting.SystemError || !strings.Contains(r.Remark, `allocateStrategy "RANDOM" is not one of AVG, AVG_BY_CIRCLE, CONSISTENT_HASH`) {
		t.Errorf("bad strategy: %d %s", r.Code, r.Remark)
	}
	if _, err := b.Admin().Run(context.Background(), "consumers.strategy", json.RawMessage(`{"group":"`+group+`","clear":true}`)); err != nil {
		t.Fatal(err)
	}
	if got := both("AVG_BY_CIRCLE"); got != "0 2 4 | 1 3" {
		t.Errorf("cleared, client AVG_BY_CIRCLE: %s", got)
	}

	// Broadcasting: every queue for anyone.
	if got := ask(c1, "", "BROADCASTING"); got != "0 1 2 3 4" {
		t.Errorf("broadcasting: %s", got)
	}
	// A client outside the group: an empty assignment.
	stranger := newLockClient(t, env, group, "10.9.9.9@1")
	if got := ask(stranger, "AVG", "CLUSTERING"); got != "" {
		t.Errorf("stranger: %q", got)
	}
	// Errors.
	for _, c := range []struct {
		body string
		code int16
		want string
	}{
		{`{"topic":"NoSuchTopic","consumerGroup":"g","clientId":"c","messageModel":"CLUSTERING"}`, remoting.TopicNotExist, "topic NoSuchTopic does not exist"},
		{`{"topic":`, remoting.SystemError, "bad body"},
		{`{"topic":"` + topic + `","consumerGroup":"g","clientId":"c","messageModel":"PUSH"}`, remoting.SystemError, "messageModel must be CLUSTERING or BROADCASTING"},
		{`{"topic":"` + topic + `","clientId":"c","messageModel":"CLUSTERING"}`, remoting.SystemError, "consumerGroup must hold"},
		{`{"topic":"` + strings.Repeat("x", 300) + `","consumerGroup":"g","messageModel":"CLUSTERING"}`, remoting.SystemError, "longer than 127"},
	} {
		resp := c1.invoke(remoting.NewRequest(remoting.QueryAssignment, nil, []byte(c.body)))
		if resp.Code != c.code || !strings.Contains(resp.Remark, c.want) {
			t.Errorf("%.60s: %d %q, want %d %q", c.body, resp.Code, resp.Remark, c.code, c.want)
		}
	}
}
