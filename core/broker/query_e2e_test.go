package broker_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// queryMessage sends QUERY_MESSAGE as RocketMQ's admin tools do and
// returns the response and the records of its body.
func queryMessage(t *testing.T, env *brokertest.Env, topic, key string, unique bool, begin, end time.Time, maxNum int) (*remoting.Command, []message.Record) {
	t.Helper()
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	h := map[string]string{
		"topic":          topic,
		"key":            key,
		"maxNum":         strconv.Itoa(maxNum),
		"beginTimestamp": strconv.FormatInt(begin.UnixMilli(), 10),
		"endTimestamp":   strconv.FormatInt(end.UnixMilli(), 10),
	}
	if unique {
		h["_UNIQUE_KEY_QUERY"] = "true"
	}
	resp, err := cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.QueryMessage, h, nil))
	if err != nil {
		t.Fatalf("query %s/%s: %v", topic, key, err)
	}
	recs, err := message.DecodeRecords(resp.Body)
	if err != nil {
		t.Fatalf("query %s/%s: body: %v", topic, key, err)
	}
	return resp, recs
}

func bodies(recs []message.Record) []string {
	var out []string
	for _, r := range recs {
		out = append(out, string(r.Body()))
	}
	return out
}

// TestQueryMessageByKey sends keyed messages with the official client and
// finds them with QUERY_MESSAGE by key and by unique key, within their
// time bounds and not outside them.
func TestQueryMessageByKey(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("Query")
	createTopic(t, env, topic, 2)
	p := env.Producer(t)

	began := time.Now().Add(-time.Second)
	var ids []string
	for i := 0; i < 5; i++ {
		m := primitive.NewMessage(topic, []byte("q-"+strconv.Itoa(i)))
		m.WithKeys([]string{"order-" + strconv.Itoa(i), "shared"})
		res, err := p.SendSync(context.Background(), m)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.MsgID)
	}
	ended := time.Now().Add(time.Second)

	resp, recs := queryMessage(t, env, topic, "shared", false, began, ended, 32)
	if resp.Code != remoting.Success || len(recs) != 5 {
		t.Fatalf("shared: code %d %q, %d records", resp.Code, resp.Remark, len(recs))
	}
	if resp.Get("indexLastUpdatePhyoffset") == "" || resp.Get("indexLastUpdateTimestamp") == "" {
		t.Errorf("response header lacks the index position: %v", resp.Fields())
	}
	for _, r := range recs {
		if string(r.Topic()) != topic {
			t.Errorf("record of %s", r.Topic())
		}
	}

	if _, recs := queryMessage(t, env, topic, "order-3", false, began, ended, 32); len(recs) != 1 || string(recs[0].Body()) != "q-3" {
		t.Errorf("order-3: %q", bodies(recs))
	}
	if _, recs := queryMessage(t, env, topic, "shared", false, began, ended, 2); len(recs) != 2 {
		t.Errorf("maxNum 2: %d records", len(recs))
	}
	if _, recs := queryMessage(t, env, topic, ids[2], true, began, ended, 32); len(recs) != 1 || string(recs[0].Body()) != "q-2" {
		t.Errorf("unique key %s: %q", ids[2], bodies(recs))
	}
	// Outside the time bounds, in another topic, or an unknown key: none.
	for _, c := range []struct {
		name         string
		topic, key   string
		begin, ended time.Time
	}{
		{"later", topic, "shared", ended.Add(time.Hour), ended.Add(2 * time.Hour)},
		{"earlier", topic, "shared", began.Add(-2 * time.Hour), began.Add(-time.Hour)},
		{"other topic", topic + "x", "shared", began, ended},
		{"unknown key", topic, "nobody", began, ended},
	} {
		if resp, recs := queryMessage(t, env, c.topic, c.key, false, c.begin, c.ended, 32); resp.Code != remoting.QueryNotFound || len(recs) != 0 {
			t.Errorf("%s: code %d, %d records", c.name, resp.Code, len(recs))
		}
	}
	// The broker's own topics are never served.
	if resp, _ := queryMessage(t, env, broker.HalfTopic, "shared", false, began, ended, 32); resp.Code != remoting.NoPermission {
		t.Errorf("half topic: code %d", resp.Code)
	}
}

// TestTraceTopicCreated checks that the trace topic exists from the start,
// unless traceTopicEnable is off.
func TestTraceTopicCreated(t *testing.T) {
	env := brokertest.Start(t)
	tc, ok := env.Broker.Topics()[broker.TraceTopic]
	if !ok || tc.WriteQueueNums < 1 || tc.Perm&6 != 6 {
		t.Fatalf("trace topic: %+v, present %v", tc, ok)
	}
	off := brokertest.Start(t, func(c *server.Config) { c.Broker.DisableTraceTopic = true })
	if _, ok := off.Broker.Topics()[broker.TraceTopic]; ok {
		t.Fatal("trace topic created with traceTopicEnable off")
	}
}
