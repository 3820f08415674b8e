package broker_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// traced is set once TestTraceDefaultTopic has run in this process.
var traced atomic.Bool

// TestTraceDefaultTopic traces with default settings (no trace topic):
// the client finds RMQ_SYS_TRACE_TOPIC, the trace is stored there, and
// QUERY_MESSAGE by the traced message's key finds it.
//
// The official client keeps one trace client per process, bound to the
// first name server it was given: a second tracing producer in the same
// process, against another broker, gets no dispatcher and panics on send.
// So only this test traces, and it skips when run again in one process
// (-count above 1).
func TestTraceDefaultTopic(t *testing.T) {
	if traced.Swap(true) {
		t.Skip("the official client's trace client is bound to the broker of this test's first run")
	}
	env := brokertest.Start(t)
	topic := brokertest.Name("Traced")
	createTopic(t, env, topic, 1)
	p := env.Producer(t, producer.WithTrace(&primitive.TraceConfig{
		GroupName: brokertest.Name("trace"),
		Access:    primitive.Local,
		Resolver:  env.Resolver(),
	}))
	key := brokertest.Name("tracedkey")
	m := primitive.NewMessage(topic, []byte("traced"))
	m.WithKeys([]string{key})
	began := time.Now().Add(-time.Second)
	res, err := p.SendSync(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	var found string
	brokertest.Eventually(t, 30*time.Second, "the trace stored and indexed", func() bool {
		_, recs := queryMessage(t, env, broker.TraceTopic, key, false, began, time.Now().Add(time.Second), 32)
		if len(recs) == 0 {
			return false
		}
		found = string(recs[0].Body())
		return true
	})
	if !strings.Contains(found, res.MsgID) || !strings.Contains(found, topic) {
		t.Fatalf("trace body names neither the message id %s nor topic %s: %q", res.MsgID, topic, found)
	}
	// The trace's KEYS carry the traced message id too.
	if _, recs := queryMessage(t, env, broker.TraceTopic, res.MsgID, false, began, time.Now().Add(time.Second), 32); len(recs) == 0 {
		t.Fatalf("trace not found by the traced message id %s", res.MsgID)
	}
}
