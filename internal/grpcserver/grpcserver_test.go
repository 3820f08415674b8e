package grpcserver_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
	"github.com/rmq-go/rmq/internal/server"
)

func TestClientIDRequired(t *testing.T) {
	e := start(t)
	c, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	r, err := e.cl.QueryRoute(c, &pb.QueryRouteRequest{Topic: res("T")})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status.GetCode() != pb.Code_CLIENT_ID_REQUIRED {
		t.Fatalf("status %v, want CLIENT_ID_REQUIRED", r.Status)
	}
	h, err := e.cl.Heartbeat(c, &pb.HeartbeatRequest{})
	if err != nil || h.Status.GetCode() != pb.Code_CLIENT_ID_REQUIRED {
		t.Fatalf("heartbeat: %v %v", h, err)
	}
}

func TestQueryRoute(t *testing.T) {
	e := start(t)
	topic := brokertest.Name("Route")
	e.createTopic(t, topic, 3)
	r, err := e.cl.QueryRoute(ctx(t), &pb.QueryRouteRequest{Topic: res(topic)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status.GetCode() != pb.Code_OK || len(r.MessageQueues) != 3 {
		t.Fatalf("route: %v", r)
	}
	q0 := r.MessageQueues[0]
	if q0.Id != 0 || q0.Permission != pb.Permission_READ_WRITE || q0.Broker.GetId() != 0 {
		t.Fatalf("queue 0: %v", q0)
	}
	a := q0.Broker.GetEndpoints().GetAddresses()
	if len(a) != 1 || !strings.HasSuffix(e.GRPCAddr, ":"+itoa(a[0].Port)) || a[0].Host != "127.0.0.1" {
		t.Fatalf("endpoint %v, want %s", a, e.GRPCAddr)
	}
	if len(q0.AcceptMessageTypes) == 0 {
		t.Fatal("no accepted message types")
	}

	// Auto-created on first route, as a send would.
	auto := brokertest.Name("Auto")
	if r, _ := e.cl.QueryRoute(ctx(t), &pb.QueryRouteRequest{Topic: res(auto)}); r.Status.GetCode() != pb.Code_OK || len(r.MessageQueues) == 0 {
		t.Fatalf("auto-created route: %v", r)
	}
	if _, ok := e.Broker.Topic(auto); !ok {
		t.Fatal("topic not created")
	}
}

func TestQueryRouteNoAutoCreate(t *testing.T) {
	e := start(t, func(c *server.Config) { c.Broker.DisableAutoCreateTopic = true })
	r, err := e.cl.QueryRoute(ctx(t), &pb.QueryRouteRequest{Topic: res("Missing")})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status.GetCode() != pb.Code_TOPIC_NOT_FOUND {
		t.Fatalf("status %v, want TOPIC_NOT_FOUND", r.Status)
	}
}

func TestQueryAssignment(t *testing.T) {
	e := start(t)
	topic := brokertest.Name("Assign")
	e.createTopic(t, topic, 4)
	r, err := e.cl.QueryAssignment(ctx(t), &pb.QueryAssignmentRequest{Topic: res(topic), Group: res("g1")})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status.GetCode() != pb.Code_OK || len(r.Assignments) != 1 || r.Assignments[0].MessageQueue.Id != -1 {
		t.Fatalf("assignment: %v", r)
	}
}

// telemetry opens a Telemetry stream, sends st and returns the answer.
func telemetry(t *testing.T, e *env, c context.Context, st *pb.Settings) *pb.TelemetryCommand {
	t.Helper()
	r, err := telemetryFirst(t, e, c, st)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// telemetryFirst opens a Telemetry stream, sends st and returns what
// comes back first.
func telemetryFirst(t *testing.T, e *env, c context.Context, st *pb.Settings) (*pb.TelemetryCommand, error) {
	t.Helper()
	s, err := e.cl.Telemetry(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&pb.TelemetryCommand{Command: &pb.TelemetryCommand_Settings{Settings: st}}); err != nil {
		t.Fatal(err)
	}
	return s.Recv()
}

// telemetryRefused sends settings the broker must refuse and returns the
// error the stream ends with; a reply instead fails the test.
func telemetryRefused(t *testing.T, e *env, c context.Context, st *pb.Settings) error {
	t.Helper()
	r, err := telemetryFirst(t, e, c, st)
	if err == nil {
		t.Fatalf("refused settings answered with %v", r)
	}
	return err
}

// TestTelemetryRefusedSettings: a consumer's settings naming a group the
// broker refuses end the stream with the reason (INVALID_ARGUMENT), as
// RocketMQ's proxy ends it; the session is not opened.
func TestTelemetryRefusedSettings(t *testing.T) {
	e := start(t)
	c := ctx(t)
	err := telemetryRefused(t, e, c, &pb.Settings{ClientType: pb.ClientType_SIMPLE_CONSUMER.Enum(),
		PubSub: &pb.Settings_Subscription{Subscription: &pb.Subscription{Group: res("bad group!")}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "bad group!") {
		t.Fatalf("settings of a bad group: %v, want InvalidArgument naming it", err)
	}
	if h, _ := e.cl.Heartbeat(c, &pb.HeartbeatRequest{ClientType: pb.ClientType_SIMPLE_CONSUMER}); h.Status.GetCode() != pb.Code_UNRECOGNIZED_CLIENT_TYPE {
		t.Fatalf("heartbeat after refused settings: %v", h.Status)
	}
}

func TestTelemetrySettings(t *testing.T) {
	e := start(t)
	c := ctx(t)
	if h, _ := e.cl.Heartbeat(c, &pb.HeartbeatRequest{ClientType: pb.ClientType_PRODUCER}); h.Status.GetCode() != pb.Code_UNRECOGNIZED_CLIENT_TYPE {
		t.Fatalf("heartbeat before settings: %v", h.Status)
	}
	r := telemetry(t, e, c, &pb.Settings{ClientType: pb.ClientType_PRODUCER.Enum(), PubSub: &pb.Settings_Publishing{Publishing: &pb.Publishing{Topics: []*pb.Resource{res("T")}}}})
	if r.Status.GetCode() != pb.Code_OK {
		t.Fatalf("producer settings: %v", r.Status)
	}
	p := r.GetSettings()
	if p.GetBackoffPolicy().GetExponentialBackoff() == nil || p.GetBackoffPolicy().GetMaxAttempts() < 1 || p.GetPublishing().GetMaxBodySize() != broker.DefaultMaxMessageSize {
		t.Fatalf("producer settings: %v", p)
	}
	if h, _ := e.cl.Heartbeat(c, &pb.HeartbeatRequest{ClientType: pb.ClientType_PRODUCER}); h.Status.GetCode() != pb.Code_OK {
		t.Fatalf("heartbeat after settings: %v", h.Status)
	}

	cc := ctx(t, "x-mq-client-id", "consumer-1")
	cc = metadata.NewOutgoingContext(cc, metadata.Pairs("x-mq-client-id", "consumer-1"))
	r = telemetry(t, e, cc, &pb.Settings{ClientType: pb.ClientType_SIMPLE_CONSUMER.Enum(), PubSub: &pb.Settings_Subscription{Subscription: &pb.Subscription{Group: res("cg")}}})
	sub := r.GetSettings().GetSubscription()
	if r.Status.GetCode() != pb.Code_OK || sub.GetReceiveBatchSize() != 32 || sub.GetLongPollingTimeout().AsDuration() > 20*time.Second || sub.GetFifo() {
		t.Fatalf("consumer settings: %v", r)
	}
	if got := r.GetSettings().GetBackoffPolicy().GetMaxAttempts(); got != broker.DefaultMaxReconsumeTimes+1 {
		t.Fatalf("consumer max attempts %d, want %d", got, broker.DefaultMaxReconsumeTimes+1)
	}

	if n, _ := e.cl.NotifyClientTermination(c, &pb.NotifyClientTerminationRequest{}); n.Status.GetCode() != pb.Code_OK {
		t.Fatalf("termination: %v", n.Status)
	}
	if h, _ := e.cl.Heartbeat(c, &pb.HeartbeatRequest{}); h.Status.GetCode() != pb.Code_UNRECOGNIZED_CLIENT_TYPE {
		t.Fatalf("heartbeat after termination: %v", h.Status)
	}
}

// TestSettingsRetryPolicy: a consumer's settings carry its group's retry
// policy as Apache's proxy sends it: the ladder of the broker's delay
// levels (CUSTOMIZED) unless the group is EXPONENTIAL, with
// retryMaxTimes+1 attempts.
func TestSettingsRetryPolicy(t *testing.T) {
	levels := broker.DelayLevels{2 * time.Second, 7 * time.Second, time.Minute}
	e := start(t, func(c *server.Config) { c.Broker.DelayLevels = levels })
	ladder, exp, capped := brokertest.Name("ladder"), brokertest.Name("exp"), brokertest.Name("capped")
	for _, gc := range []broker.SubscriptionGroupConfig{
		{GroupName: exp, ConsumeEnable: true, RetryQueueNums: 1, RetryMaxTimes: 16,
			GroupRetryPolicy: &broker.GroupRetryPolicy{Type: broker.RetryPolicyExponential, ExponentialRetryPolicy: &broker.ExponentialRetryPolicy{Initial: 1000, Max: 60000, Multiplier: 3}}},
		{GroupName: capped, ConsumeEnable: true, RetryQueueNums: 1, RetryMaxTimes: 2,
			GroupRetryPolicy: &broker.GroupRetryPolicy{Type: broker.RetryPolicyCustomized, CustomizedRetryPolicy: &broker.CustomizedRetryPolicy{Next: []int64{500, 1500}}}},
	} {
		if err := e.Broker.PutGroupConfig(gc); err != nil {
			t.Fatal(err)
		}
	}
	policy := func(group string) *pb.RetryPolicy {
		t.Helper()
		c := metadata.NewOutgoingContext(ctx(t), metadata.Pairs("x-mq-client-id", "c-"+group))
		r := telemetry(t, e, c, &pb.Settings{ClientType: pb.ClientType_PUSH_CONSUMER.Enum(), PubSub: &pb.Settings_Subscription{Subscription: &pb.Subscription{Group: res(group)}}})
		if r.Status.GetCode() != pb.Code_OK {
			t.Fatalf("settings of %s: %v", group, r.Status)
		}
		return r.GetSettings().GetBackoffPolicy()
	}
	durations := func(ds []*durationpb.Duration) []time.Duration {
		var out []time.Duration
		for _, d := range ds {
			out = append(out, d.AsDuration())
		}
		return out
	}

	p := policy(ladder)
	if p.GetMaxAttempts() != broker.DefaultMaxReconsumeTimes+1 || p.GetCustomizedBackoff() == nil {
		t.Fatalf("default group: %v", p)
	}
	if got := durations(p.GetCustomizedBackoff().GetNext()); !slices.Equal(got, []time.Duration(levels)) {
		t.Fatalf("default group's ladder %v, want the delay levels %v", got, levels)
	}
	p = policy(capped)
	if got := durations(p.GetCustomizedBackoff().GetNext()); p.GetMaxAttempts() != 3 || !slices.Equal(got, []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond}) {
		t.Fatalf("group with its own ladder: %v", p)
	}
	p = policy(exp)
	x := p.GetExponentialBackoff()
	if p.GetMaxAttempts() != 17 || x.GetInitial().AsDuration() != time.Second || x.GetMax().AsDuration() != time.Minute || x.GetMultiplier() != 3 {
		t.Fatalf("exponential group: %v", p)
	}
}

func TestTelemetrySessionCap(t *testing.T) {
	e := start(t, func(c *server.Config) { c.GRPC.MaxSessions = 1 })
	st := &pb.Settings{ClientType: pb.ClientType_PRODUCER.Enum(), PubSub: &pb.Settings_Publishing{Publishing: &pb.Publishing{}}}
	if r := telemetry(t, e, ctx(t), st); r.Status.GetCode() != pb.Code_OK {
		t.Fatalf("first session: %v", r.Status)
	}
	other := metadata.NewOutgoingContext(ctx(t), metadata.Pairs("x-mq-client-id", "second"))
	if err := telemetryRefused(t, e, other, st); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "TOO_MANY_REQUESTS") {
		t.Fatalf("second session: %v, want ResourceExhausted (TOO_MANY_REQUESTS)", err)
	}
}

func TestSendReceiveAck(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Pop"), brokertest.Name("g")
	e.createTopic(t, topic, 4)
	for i, tag := range []string{"a", "b", "a", "c"} {
		e.send(t, msg(topic, "id"+itoa(int32(i)), tag, "body-"+itoa(int32(i))))
	}
	st, msgs := e.receive(t, group, topic, &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "a || c"}, 32, 30*time.Second, time.Second)
	if st.GetCode() != pb.Code_OK || len(msgs) != 3 {
		t.Fatalf("receive: %v, %d messages", st, len(msgs))
	}
	for _, m := range msgs {
		sp := m.SystemProperties
		sum := md5.Sum(m.Body)
		if sp.GetBodyDigest().GetChecksum() != strings.ToUpper(hex.EncodeToString(sum[:])) || sp.GetDeliveryAttempt() != 1 || sp.GetReceiptHandle() == "" || sp.GetTag() == "b" {
			t.Fatalf("message %v", m)
		}
		if code := e.ack(t, group, topic, m, sp.GetReceiptHandle()); code != pb.Code_OK {
			t.Fatalf("ack: %v", code)
		}
		if code := e.ack(t, group, topic, m, sp.GetReceiptHandle()); code != pb.Code_INVALID_RECEIPT_HANDLE {
			t.Fatalf("second ack: %v, want INVALID_RECEIPT_HANDLE", code)
		}
	}
	if st, msgs := e.receive(t, group, topic, nil, 32, 30*time.Second, 100*time.Millisecond); st.GetCode() != pb.Code_MESSAGE_NOT_FOUND || len(msgs) != 0 {
		t.Fatalf("after acks: %v, %d messages", st, len(msgs))
	}
	// A second group sees every message.
	if _, msgs := e.receive(t, brokertest.Name("g"), topic, nil, 32, 30*time.Second, time.Second); len(msgs) != 4 {
		t.Fatalf("second group: %d messages, want 4", len(msgs))
	}
}

func TestSQLFilter(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Sql"), brokertest.Name("g")
	e.createTopic(t, topic, 2)
	for i := range 4 {
		m := msg(topic, "id"+itoa(int32(i)), "t", "x")
		m.UserProperties = map[string]string{"n": itoa(int32(i))}
		e.send(t, m)
	}
	_, msgs := e.receive(t, group, topic, &pb.FilterExpression{Type: pb.FilterType_SQL, Expression: "n >= 2"}, 32, 30*time.Second, time.Second)
	if len(msgs) != 2 {
		t.Fatalf("SQL filter: %d messages, want 2", len(msgs))
	}
	for _, m := range msgs {
		if m.UserProperties["n"] < "2" {
			t.Fatalf("message %v passed n >= 2", m.UserProperties)
		}
	}
	if st, _ := e.receive(t, group, topic, &pb.FilterExpression{Type: pb.FilterType_SQL, Expression: "n >>= 2"}, 32, time.Second, 0); st.GetCode() != pb.Code_ILLEGAL_FILTER_EXPRESSION {
		t.Fatalf("bad SQL: %v", st)
	}
}

func TestReceiptHandleErrors(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Handle"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	e.send(t, msg(topic, "id1", "t", "x"))
	_, msgs := e.receive(t, group, topic, nil, 1, 30*time.Second, time.Second)
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	h := msgs[0].SystemProperties.GetReceiptHandle()
	tampered := []byte(h)
	tampered[len(tampered)/2] ^= 1
	for name, bad := range map[string]string{"garbage": "not-a-handle", "tampered": string(tampered), "empty": ""} {
		if code := e.ack(t, group, topic, msgs[0], bad); code != pb.Code_INVALID_RECEIPT_HANDLE {
			t.Fatalf("%s handle: %v", name, code)
		}
	}
	// A handle is bound to its group.
	if code := e.ack(t, brokertest.Name("other"), topic, msgs[0], h); code != pb.Code_INVALID_RECEIPT_HANDLE {
		t.Fatalf("other group's ack: %v", code)
	}
	// Superseded by ChangeInvisibleDuration.
	st, h2 := e.change(t, group, topic, h, 30*time.Second)
	if st.GetCode() != pb.Code_OK || h2 == "" || h2 == h {
		t.Fatalf("change: %v %q", st, h2)
	}
	if code := e.ack(t, group, topic, msgs[0], h); code != pb.Code_INVALID_RECEIPT_HANDLE {
		t.Fatalf("superseded handle: %v", code)
	}
	if st, _ := e.change(t, group, topic, h, time.Second); st.GetCode() != pb.Code_INVALID_RECEIPT_HANDLE {
		t.Fatalf("change with superseded handle: %v", st)
	}
	if code := e.ack(t, group, topic, msgs[0], h2); code != pb.Code_OK {
		t.Fatalf("ack with the new handle: %v", code)
	}
}

func TestRedeliveryThenDLQ(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Redeliver"), brokertest.Name("g")
	e.createTopic(t, topic, 2)
	if err := e.Broker.PutGroupConfig(broker.SubscriptionGroupConfig{GroupName: group, ConsumeEnable: true, RetryQueueNums: 1, RetryMaxTimes: 2}); err != nil {
		t.Fatal(err)
	}
	e.send(t, msg(topic, "poison", "t", "x"))
	// Attempts 1..3 (retry max 2 + 1), each given up at once with
	// ChangeInvisibleDuration 0; the fourth would-be delivery goes to the
	// dead-letter topic.
	for attempt := int32(1); attempt <= 3; attempt++ {
		_, msgs := e.receive(t, group, topic, nil, 32, 30*time.Second, 5*time.Second)
		if len(msgs) != 1 || msgs[0].SystemProperties.GetDeliveryAttempt() != attempt {
			t.Fatalf("attempt %d: %v", attempt, msgs)
		}
		if st, _ := e.change(t, group, topic, msgs[0].SystemProperties.GetReceiptHandle(), 0); st.GetCode() != pb.Code_OK {
			t.Fatalf("nack: %v", st)
		}
	}
	if st, msgs := e.receive(t, group, topic, nil, 32, 30*time.Second, 200*time.Millisecond); len(msgs) != 0 {
		t.Fatalf("after the limit: %v %v", st, msgs)
	}
	dlq := broker.DLQGroupTopicPrefix + group
	if n := e.Store.MaxOffset(dlq, 0); n != 1 {
		t.Fatalf("%s holds %d messages, want 1", dlq, n)
	}
	rec, err := e.Broker.View().MessageAt(dlq, 0, 0)
	if err != nil || string(rec.Body()) != "x" {
		t.Fatalf("dead letter: %v %v", rec, err)
	}
}

func TestRedeliveryAfterInvisibleTime(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Invisible"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	e.send(t, msg(topic, "id", "t", "x"))
	_, first := e.receive(t, group, topic, nil, 32, time.Second, time.Second)
	if len(first) != 1 {
		t.Fatalf("%d messages", len(first))
	}
	// Nothing acks: the receive waits for the invisible time to end.
	start := time.Now()
	_, again := e.receive(t, group, topic, nil, 32, 30*time.Second, 10*time.Second)
	if len(again) != 1 || again[0].SystemProperties.GetDeliveryAttempt() != 2 {
		t.Fatalf("redelivery: %v", again)
	}
	if waited := time.Since(start); waited > 8*time.Second {
		t.Fatalf("redelivered after %v", waited)
	}
	if code := e.ack(t, group, topic, first[0], first[0].SystemProperties.GetReceiptHandle()); code != pb.Code_INVALID_RECEIPT_HANDLE {
		t.Fatalf("expired handle: %v", code)
	}
}

// TestChangeInvisibleReschedulesWaitingReceive: a receive waiting on a
// long poll of 20 s while a message is in flight for 30 s gets that
// message when ChangeInvisibleDuration shortens its invisible time to
// 1 s: at 1 s, not when the long poll ends.
func TestChangeInvisibleReschedulesWaitingReceive(t *testing.T) {
	e := start(t, func(c *server.Config) { c.GRPC.LongPolling = 20 * time.Second })
	topic, group := brokertest.Name("Resched"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	e.send(t, msg(topic, "id", "t", "x"))
	_, first := e.receive(t, group, topic, nil, 32, 30*time.Second, time.Second)
	if len(first) != 1 {
		t.Fatalf("%d messages", len(first))
	}
	type result struct {
		msgs []*pb.Message
		at   time.Time
	}
	done := make(chan result, 1)
	go func() {
		_, msgs := e.receive(t, group, topic, nil, 32, 30*time.Second, 20*time.Second)
		done <- result{msgs, time.Now()}
	}()
	// Change once the receive sleeps on its timer, set by the 30 s
	// deadline (a change before its first look is found by that look).
	waitFor(t, func() bool { return e.GRPC.Parked() > 0 })
	changed := time.Now()
	if st, _ := e.change(t, group, topic, first[0].SystemProperties.GetReceiptHandle(), time.Second); st.GetCode() != pb.Code_OK {
		t.Fatalf("change: %v", st)
	}
	r := <-done
	took := r.at.Sub(changed)
	if len(r.msgs) != 1 || r.msgs[0].SystemProperties.GetDeliveryAttempt() != 2 {
		t.Fatalf("after %v: %v", took, r.msgs)
	}
	if took < time.Second-10*time.Millisecond || took > 3*time.Second {
		t.Fatalf("redelivered %v after the change to 1 s", took)
	}
	t.Logf("redelivered %v after the change to 1 s", took)
}

func TestLongPollWakesOnArrival(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Wake"), brokertest.Name("g")
	e.createTopic(t, topic, 2)
	type result struct {
		n    int
		took time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		_, msgs := e.receive(t, group, topic, nil, 32, 30*time.Second, 15*time.Second)
		done <- result{len(msgs), time.Since(start)}
	}()
	// Send once the receive counts as waiting (a send just before its
	// first look is found by that look, which proves less but passes).
	waitFor(t, func() bool { return pollWaiting(e) })
	e.send(t, msg(topic, "late", "t", "x"))
	r := <-done
	if r.n != 1 || r.took > 10*time.Second {
		t.Fatalf("woken receive: %d messages after %v", r.n, r.took)
	}
}

func TestReceiveAnswersBeforeDeadline(t *testing.T) {
	e := start(t)
	topic := brokertest.Name("Deadline")
	e.createTopic(t, topic, 1)
	c, cancel := context.WithTimeout(ctx(t), 2*time.Second)
	defer cancel()
	s, err := e.cl.ReceiveMessage(c, &pb.ReceiveMessageRequest{Group: res("g"), MessageQueue: &pb.MessageQueue{Topic: res(topic)},
		BatchSize: 1, InvisibleDuration: durationpb.New(time.Second), LongPollingTimeout: durationpb.New(20 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Recv()
	if err != nil {
		t.Fatalf("no answer before the deadline: %v", err)
	}
	if r.GetStatus().GetCode() != pb.Code_MESSAGE_NOT_FOUND {
		t.Fatalf("answer %v", r)
	}
}

func TestFIFOSendKeepsGroupsOnOneQueue(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Fifo"), brokertest.Name("g")
	e.createTopic(t, topic, 4)
	for i := range 6 {
		m := msg(topic, "f"+itoa(int32(i)), "t", itoa(int32(i)))
		g := "order-" + itoa(int32(i%2))
		m.SystemProperties.MessageType, m.SystemProperties.MessageGroup = pb.MessageType_FIFO, &g
		e.send(t, m)
	}
	_, msgs := e.receive(t, group, topic, nil, 32, 30*time.Second, time.Second)
	if len(msgs) != 6 {
		t.Fatalf("%d messages", len(msgs))
	}
	queues := map[string]int32{}
	for _, m := range msgs {
		sp := m.SystemProperties
		if sp.GetMessageType() != pb.MessageType_FIFO {
			t.Fatalf("type %v", sp.GetMessageType())
		}
		if q, ok := queues[sp.GetMessageGroup()]; ok && q != sp.GetQueueId() {
			t.Fatalf("group %s on queues %d and %d", sp.GetMessageGroup(), q, sp.GetQueueId())
		}
		queues[sp.GetMessageGroup()] = sp.GetQueueId()
	}
	bad := msg(topic, "nogroup", "t", "x")
	bad.SystemProperties.MessageType = pb.MessageType_FIFO
	r, _ := e.cl.SendMessage(ctx(t), &pb.SendMessageRequest{Messages: []*pb.Message{bad}})
	if r.Status.GetCode() != pb.Code_ILLEGAL_MESSAGE_GROUP {
		t.Fatalf("FIFO without group: %v", r.Status)
	}
}

func TestSendErrors(t *testing.T) {
	e := start(t)
	topic := brokertest.Name("SendErr")
	e.createTopic(t, topic, 1)
	noID := msg(topic, "", "t", "x")
	reserved := msg(topic, "r", "t", "x")
	reserved.UserProperties = map[string]string{"UNIQ_KEY": "mine"}
	bigProps := msg(topic, "p", "t", "x")
	bigProps.UserProperties = map[string]string{"big": strings.Repeat("p", 40000)}
	readOnly := brokertest.Name("ReadOnly")
	if err := e.Broker.CreateTopic(broker.TopicConfig{TopicName: readOnly, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 4}); err != nil {
		t.Fatal(err)
	}
	// The broker's refusals, mapped by the endpoint's one table from the
	// broker's kinds of error.
	for name, c := range map[string]struct {
		m    *pb.Message
		want pb.Code
	}{
		"no message id":         {noID, pb.Code_ILLEGAL_MESSAGE_ID},
		"reserved property":     {reserved, pb.Code_ILLEGAL_MESSAGE_PROPERTY_KEY},
		"properties over limit": {bigProps, pb.Code_MESSAGE_PROPERTIES_TOO_LARGE},
		"topic not writable":    {msg(readOnly, "w", "t", "x"), pb.Code_FORBIDDEN},
	} {
		r, err := e.cl.SendMessage(ctx(t), &pb.SendMessageRequest{Messages: []*pb.Message{c.m}})
		if err != nil || r.Status.GetCode() != c.want || r.Entries[0].Status.GetCode() != c.want {
			t.Fatalf("%s: %v %v, want %v", name, r, err, c.want)
		}
	}
}

func TestDelayMessage(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Delay"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	m := msg(topic, "d1", "t", "later")
	at := time.Now().Add(1500 * time.Millisecond)
	m.SystemProperties.MessageType, m.SystemProperties.DeliveryTimestamp = pb.MessageType_DELAY, timestamppb.New(at)
	e.send(t, m)
	if _, msgs := e.receive(t, group, topic, nil, 32, 30*time.Second, 0); len(msgs) != 0 {
		t.Fatal("delayed message delivered at once")
	}
	_, msgs := e.receive(t, group, topic, nil, 32, 30*time.Second, 15*time.Second)
	if len(msgs) != 1 || time.Now().Before(at) || msgs[0].SystemProperties.GetMessageType() != pb.MessageType_DELAY {
		t.Fatalf("delayed message: %v at %v, due %v", msgs, time.Now(), at)
	}
}

// TestRecallDelayMessage recalls one of two delayed messages due at the
// same moment: only the other is delivered. Recalling it again succeeds;
// a handle for another topic, a malformed one and one of a message
// already delivered are refused.
func TestRecallDelayMessage(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Recall"), brokertest.Name("g")
	e.createTopic(t, topic, 2)
	at := time.Now().Add(1500 * time.Millisecond)
	keep, gone := e.sendDelayed(t, topic, "keep", at), e.sendDelayed(t, topic, "gone", at)
	if keep.RecallHandle == "" || gone.RecallHandle == "" {
		t.Fatalf("no recall handles: %v %v", keep, gone)
	}
	if plain := e.send(t, msg(topic, "plain", "t", "plain")); plain.RecallHandle != "" {
		t.Fatalf("a message not delayed has a recall handle: %v", plain)
	}
	recall := func(topic, handle string) *pb.RecallMessageResponse {
		t.Helper()
		r, err := e.cl.RecallMessage(ctx(t), &pb.RecallMessageRequest{Topic: &pb.Resource{Name: topic}, RecallHandle: handle})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for i := 0; i < 2; i++ {
		if r := recall(topic, gone.RecallHandle); r.Status.GetCode() != pb.Code_OK || r.MessageId != "gone" {
			t.Fatalf("recall %d: %v", i+1, r)
		}
	}
	for name, c := range map[string]struct{ topic, handle string }{
		"another topic": {topic + "X", keep.RecallHandle},
		"malformed":     {topic, "not-a-handle"},
		"empty":         {topic, ""},
	} {
		if r := recall(c.topic, c.handle); r.Status.GetCode() != pb.Code_BAD_REQUEST {
			t.Fatalf("%s: %v, want BAD_REQUEST", name, r)
		}
	}

	var bodies []string
	for len(bodies) < 2 { // the plain message, then the one kept
		_, msgs := e.receive(t, group, topic, nil, 32, 30*time.Second, 15*time.Second)
		if len(msgs) == 0 {
			t.Fatalf("received %v, then nothing", bodies)
		}
		for _, m := range msgs {
			bodies = append(bodies, string(m.Body))
		}
	}
	// Both were due at once: the recalled one would have come with the
	// other. One more poll past its due time finds nothing.
	if _, msgs := e.receive(t, group, topic, nil, 32, 30*time.Second, 2*time.Second); len(msgs) != 0 || !slices.Contains(bodies, "keep") || len(bodies) != 2 {
		t.Fatalf("received %v, then %d more; want plain and keep", bodies, len(msgs))
	}
	if r := recall(topic, keep.RecallHandle); r.Status.GetCode() != pb.Code_MESSAGE_NOT_FOUND {
		t.Fatalf("recall of a delivered message: %v, want MESSAGE_NOT_FOUND", r)
	}
}

func TestTransaction(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Txn"), brokertest.Name("g")
	e.createTopic(t, topic, 2)
	send := func(id string) *pb.SendResultEntry {
		m := msg(topic, id, "t", id)
		m.SystemProperties.MessageType = pb.MessageType_TRANSACTION
		en := e.send(t, m)
		if en.TransactionId == "" {
			t.Fatalf("no transaction id: %v", en)
		}
		return en
	}
	commit, rollback := send("commit-me"), send("roll-me-back")
	if _, msgs := e.receive(t, group, topic, nil, 32, 30*time.Second, 0); len(msgs) != 0 {
		t.Fatal("half message delivered")
	}
	end := func(en *pb.SendResultEntry, id string, r pb.TransactionResolution) pb.Code {
		resp, err := e.cl.EndTransaction(ctx(t), &pb.EndTransactionRequest{Topic: res(topic), MessageId: en.MessageId, TransactionId: id, Resolution: r, Source: pb.TransactionSource_SOURCE_CLIENT})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Status.GetCode()
	}
	forged := []byte(commit.TransactionId)
	forged[15] ^= 1 // another half message's offset, same MAC
	if code := end(commit, string(forged), pb.TransactionResolution_COMMIT); code != pb.Code_INVALID_TRANSACTION_ID {
		t.Fatalf("forged id: %v", code)
	}
	if code := end(commit, commit.TransactionId, pb.TransactionResolution_COMMIT); code != pb.Code_OK {
		t.Fatalf("commit: %v", code)
	}
	if code := end(rollback, rollback.TransactionId, pb.TransactionResolution_ROLLBACK); code != pb.Code_OK {
		t.Fatalf("rollback: %v", code)
	}
	if code := end(commit, commit.TransactionId, pb.TransactionResolution_COMMIT); code != pb.Code_INVALID_TRANSACTION_ID {
		t.Fatalf("second commit: %v", code)
	}
	_, msgs := e.receive(t, group, topic, nil, 32, 30*time.Second, 5*time.Second)
	if len(msgs) != 1 || string(msgs[0].Body) != "commit-me" {
		t.Fatalf("after commit and rollback: %v", msgs)
	}
}

func TestRestartRedeliversInFlight(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Restart"), brokertest.Name("g")
	e.createTopic(t, topic, 2)
	for i := range 3 {
		e.send(t, msg(topic, "r"+itoa(int32(i)), "t", "m"+itoa(int32(i))))
	}
	_, msgs := e.receive(t, group, topic, nil, 2, time.Second, time.Second)
	if len(msgs) != 2 {
		t.Fatalf("%d messages", len(msgs))
	}
	if code := e.ack(t, group, topic, msgs[0], msgs[0].SystemProperties.GetReceiptHandle()); code != pb.Code_OK {
		t.Fatalf("ack: %v", code)
	}
	acked, inFlight := string(msgs[0].Body), string(msgs[1].Body)

	e2 := connect(t, e.Restart(t))
	seen := map[string]int32{}
	deadline := time.Now().Add(15 * time.Second)
	for len(seen) < 2 && time.Now().Before(deadline) {
		_, got := e2.receive(t, group, topic, nil, 32, 30*time.Second, 5*time.Second)
		for _, m := range got {
			seen[string(m.Body)] = m.SystemProperties.GetDeliveryAttempt()
		}
	}
	if _, ok := seen[acked]; ok {
		t.Fatalf("acknowledged %s delivered again", acked)
	}
	if seen[inFlight] != 2 {
		t.Fatalf("in-flight %s: attempt %d, want 2 (seen %v)", inFlight, seen[inFlight], seen)
	}
	if len(seen) != 2 {
		t.Fatalf("seen %v, want the in-flight one and the one never delivered", seen)
	}
}

func TestUnsupportedRPCs(t *testing.T) {
	e := start(t)
	c := ctx(t)
	if r, err := e.cl.GetOffset(c, &pb.GetOffsetRequest{}); err != nil || r.Status.GetCode() != pb.Code_UNSUPPORTED || r.Status.Message == "" {
		t.Fatalf("GetOffset: %v %v", r, err)
	}
	if r, err := e.cl.UpdateOffset(c, &pb.UpdateOffsetRequest{}); err != nil || r.Status.GetCode() != pb.Code_UNSUPPORTED {
		t.Fatalf("UpdateOffset: %v %v", r, err)
	}
	if r, err := e.cl.QueryOffset(c, &pb.QueryOffsetRequest{}); err != nil || r.Status.GetCode() != pb.Code_UNSUPPORTED {
		t.Fatalf("QueryOffset: %v %v", r, err)
	}
	s, err := e.cl.PullMessage(c, &pb.PullMessageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if r, err := s.Recv(); err != nil || r.GetStatus().GetCode() != pb.Code_UNSUPPORTED {
		t.Fatalf("PullMessage: %v %v", r, err)
	}
}

func TestFIFOGroupBlocksQueue(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("FifoBlock"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	if err := e.Broker.PutGroupConfig(broker.SubscriptionGroupConfig{GroupName: group, ConsumeEnable: true, RetryQueueNums: 1, RetryMaxTimes: 16, ConsumeMessageOrderly: true}); err != nil {
		t.Fatal(err)
	}
	og := "order-1"
	for i := range 3 {
		m := msg(topic, "o"+itoa(int32(i)), "t", itoa(int32(i)))
		m.SystemProperties.MessageType, m.SystemProperties.MessageGroup = pb.MessageType_FIFO, &og
		e.send(t, m)
	}
	_, first := e.receive(t, group, topic, nil, 1, 30*time.Second, time.Second)
	if len(first) != 1 || string(first[0].Body) != "0" {
		t.Fatalf("first: %v", first)
	}
	if _, msgs := e.receive(t, group, topic, nil, 1, 30*time.Second, 0); len(msgs) != 0 {
		t.Fatalf("delivered %q while %q is in flight", msgs[0].Body, first[0].Body)
	}
	// Given up on: the same message comes back first, before the next.
	if st, _ := e.change(t, group, topic, first[0].SystemProperties.GetReceiptHandle(), 0); st.GetCode() != pb.Code_OK {
		t.Fatal(st)
	}
	_, again := e.receive(t, group, topic, nil, 1, 30*time.Second, time.Second)
	if len(again) != 1 || string(again[0].Body) != "0" || again[0].SystemProperties.GetDeliveryAttempt() != 2 {
		t.Fatalf("redelivery: %v", again)
	}
	if code := e.ack(t, group, topic, again[0], again[0].SystemProperties.GetReceiptHandle()); code != pb.Code_OK {
		t.Fatal(code)
	}
	_, next := e.receive(t, group, topic, nil, 1, 30*time.Second, time.Second)
	if len(next) != 1 || string(next[0].Body) != "1" {
		t.Fatalf("after the ack: %v", next)
	}
	r, _ := e.cl.QueryAssignment(ctx(t), &pb.QueryAssignmentRequest{Topic: res(topic), Group: res(group)})
	if len(r.GetAssignments()) != 1 || r.Assignments[0].MessageQueue.Id != 0 {
		t.Fatalf("FIFO assignment: %v", r)
	}
}

func TestOrphanedTransactionRecovery(t *testing.T) {
	e := start(t, func(c *server.Config) {
		c.Broker.TxnTimeout, c.Broker.TxnCheckInterval = time.Second, time.Second
	})
	topic, group := brokertest.Name("Orphan"), brokertest.Name("g")
	e.createTopic(t, topic, 2)
	c := ctx(t)
	tel, err := e.cl.Telemetry(c)
	if err != nil {
		t.Fatal(err)
	}
	st := &pb.Settings{ClientType: pb.ClientType_PRODUCER.Enum(), PubSub: &pb.Settings_Publishing{Publishing: &pb.Publishing{Topics: []*pb.Resource{res(topic)}}}}
	if err := tel.Send(&pb.TelemetryCommand{Command: &pb.TelemetryCommand_Settings{Settings: st}}); err != nil {
		t.Fatal(err)
	}
	if r, err := tel.Recv(); err != nil || r.GetSettings() == nil {
		t.Fatalf("settings: %v %v", r, err)
	}
	m := msg(topic, "orphan-1", "t", "orphan")
	m.SystemProperties.MessageType = pb.MessageType_TRANSACTION
	m.SystemProperties.OrphanedTransactionRecoveryDuration = durationpb.New(time.Second)
	sent := e.send(t, m)

	// The producer never ends it: the broker asks over Telemetry.
	r, err := tel.Recv()
	if err != nil {
		t.Fatal(err)
	}
	cmd := r.GetRecoverOrphanedTransactionCommand()
	if cmd == nil || cmd.TransactionId != sent.TransactionId || cmd.Message.GetSystemProperties().GetMessageId() != "orphan-1" ||
		string(cmd.Message.GetBody()) != "orphan" || cmd.Message.GetTopic().GetName() != topic {
		t.Fatalf("recovery command: %v", r)
	}
	end, err := e.cl.EndTransaction(c, &pb.EndTransactionRequest{Topic: res(topic), MessageId: "orphan-1", TransactionId: cmd.TransactionId,
		Resolution: pb.TransactionResolution_COMMIT, Source: pb.TransactionSource_SOURCE_SERVER_CHECK})
	if err != nil || end.Status.GetCode() != pb.Code_OK {
		t.Fatalf("end: %v %v", end, err)
	}
	_, msgs := e.receive(t, group, topic, nil, 32, 30*time.Second, 5*time.Second)
	if len(msgs) != 1 || string(msgs[0].Body) != "orphan" {
		t.Fatalf("after the check: %v", msgs)
	}
}

func TestSessionExpiry(t *testing.T) {
	e := start(t, func(c *server.Config) { c.GRPC.SessionExpiry = 200 * time.Millisecond })
	c, cancel := context.WithCancel(ctx(t))
	st := &pb.Settings{ClientType: pb.ClientType_PRODUCER.Enum(), PubSub: &pb.Settings_Publishing{Publishing: &pb.Publishing{}}}
	if r := telemetry(t, e, c, st); r.Status.GetCode() != pb.Code_OK {
		t.Fatal(r.Status)
	}
	heartbeat := func() pb.Code {
		h, err := e.cl.Heartbeat(ctx(t), &pb.HeartbeatRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return h.Status.GetCode()
	}
	if code := heartbeat(); code != pb.Code_OK {
		t.Fatalf("heartbeat: %v", code)
	}
	cancel() // the Telemetry stream ends; heartbeats stop
	waitFor(t, func() bool { return e.GRPC.Sessions() == 0 })
	if code := heartbeat(); code != pb.Code_UNRECOGNIZED_CLIENT_TYPE {
		t.Fatalf("heartbeat after expiry: %v", code)
	}
}

func TestReceiveErrors(t *testing.T) {
	e := start(t, func(c *server.Config) {
		c.GRPC.MaxWaiting = 1
		c.Broker.DisableAutoCreateGroup = true
	})
	topic, group := brokertest.Name("RecvErr"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	if st, _ := e.receive(t, group, topic, nil, 1, time.Second, 0); st.GetCode() != pb.Code_CONSUMER_GROUP_NOT_FOUND {
		t.Fatalf("unconfigured group: %v", st)
	}
	if err := e.Broker.PutGroupConfig(broker.SubscriptionGroupConfig{GroupName: group, ConsumeEnable: true, RetryQueueNums: 1, RetryMaxTimes: 16}); err != nil {
		t.Fatal(err)
	}
	if st, _ := e.receive(t, group, "NoSuchTopic", nil, 1, time.Second, 0); st.GetCode() != pb.Code_TOPIC_NOT_FOUND {
		t.Fatalf("unknown topic: %v", st)
	}
	if st, _ := e.receive(t, group, topic, nil, 1, -time.Second, 0); st.GetCode() != pb.Code_ILLEGAL_INVISIBLE_TIME {
		t.Fatalf("negative invisible time: %v", st)
	}
	// One receive may wait; the second is refused.
	waiting := make(chan *pb.Status, 1)
	go func() {
		st, _ := e.receive(t, group, topic, nil, 1, time.Second, 5*time.Second)
		waiting <- st
	}()
	waitFor(t, func() bool { return pollWaiting(e) })
	if st, _ := e.receive(t, group, topic, nil, 1, time.Second, 5*time.Second); st.GetCode() != pb.Code_TOO_MANY_REQUESTS {
		t.Fatalf("second waiting receive: %v", st)
	}
	e.send(t, msg(topic, "wake", "t", "x"))
	if st := <-waiting; st.GetCode() != pb.Code_OK {
		t.Fatalf("waiting receive: %v", st)
	}
}

func TestTopicMessageType(t *testing.T) {
	fifo := brokertest.Name("TypedFifo")
	e := start(t, func(c *server.Config) {
		c.Broker.Topics = []broker.TopicOptions{{Name: fifo, Queues: 2, MessageType: "FIFO"}}
	})
	r, err := e.cl.QueryRoute(ctx(t), &pb.QueryRouteRequest{Topic: res(fifo)})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.MessageQueues[0].AcceptMessageTypes; len(got) != 1 || got[0] != pb.MessageType_FIFO {
		t.Fatalf("accepted types %v, want [FIFO]", got)
	}
	normal := msg(fifo, "n1", "t", "x")
	s, _ := e.cl.SendMessage(ctx(t), &pb.SendMessageRequest{Messages: []*pb.Message{normal}})
	if s.Status.GetCode() != pb.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE {
		t.Fatalf("NORMAL to a FIFO topic: %v", s.Status)
	}
	f := msg(fifo, "f1", "t", "x")
	g := "g"
	f.SystemProperties.MessageType, f.SystemProperties.MessageGroup = pb.MessageType_FIFO, &g
	e.send(t, f)

	// mqadmin updateTopic -a +message.type=DELAY, then an update without
	// attributes keeps the type.
	delay := brokertest.Name("TypedDelay")
	cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer cl.Close()
	for _, ext := range []map[string]string{
		{"topic": delay, "readQueueNums": "2", "writeQueueNums": "2", "perm": "6", "attributes": "+message.type=DELAY"},
		{"topic": delay, "readQueueNums": "4", "writeQueueNums": "4", "perm": "6"},
	} {
		resp, err := cl.Invoke(ctx(t), e.BrokerAddr, remoting.NewRequest(remoting.UpdateAndCreateTopic, ext, nil))
		if err != nil || resp.Code != remoting.Success {
			t.Fatalf("update topic: %v %v", resp, err)
		}
	}
	if tc, _ := e.Broker.Topic(delay); tc.MessageType != "DELAY" || tc.ReadQueueNums != 4 {
		t.Fatalf("topic %+v", tc)
	}
	resp, err := cl.Invoke(ctx(t), e.BrokerAddr, remoting.NewRequest(remoting.UpdateAndCreateTopic, map[string]string{"topic": delay, "attributes": "+message.type=BOGUS"}, nil))
	if err != nil || resp.Code == remoting.Success {
		t.Fatalf("bogus type accepted: %v %v", resp, err)
	}
}

// clock is a settable clock for the endpoint.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestPushNackFollowsRetryPolicy: a push consumer's message given up with
// ChangeInvisibleDuration comes back no earlier than its group's retry
// policy says for the attempt (1 s, then 5 s on the default ladder), even
// when the client asks for less, as the Node client, which reads no
// ladder, does.
func TestPushNackFollowsRetryPolicy(t *testing.T) {
	clk := &clock{t: time.Now()}
	e := start(t, func(c *server.Config) { c.GRPC.Now = clk.Now })
	topic, group := brokertest.Name("Nack"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	receive, _ := pushReceiver(t, e, group, topic)
	e.send(t, msg(topic, "n1", "t", "failing"))
	got := receive()
	for _, step := range []struct {
		ask     time.Duration // what the client asks for
		ladder  time.Duration // the ladder's step for the attempt
		attempt int32
	}{{0, time.Second, 2}, {time.Millisecond, 5 * time.Second, 3}, {20 * time.Second, 10 * time.Second, 4}} {
		if len(got) != 1 {
			t.Fatalf("before attempt %d: %d messages", step.attempt, len(got))
		}
		if st, _ := e.change(t, group, topic, got[0].SystemProperties.GetReceiptHandle(), step.ask); st.GetCode() != pb.Code_OK {
			t.Fatalf("nack: %v", st)
		}
		wait := max(step.ask, step.ladder)
		clk.Add(wait - time.Millisecond)
		if early := receive(); len(early) != 0 {
			t.Fatalf("attempt %d came before %v: %v", step.attempt, wait, early)
		}
		clk.Add(time.Millisecond)
		if got = receive(); len(got) != 1 || got[0].SystemProperties.GetDeliveryAttempt() != step.attempt {
			t.Fatalf("attempt %d after %v: %v", step.attempt, wait, got)
		}
	}
}

// pushReceiver sets up a push consumer of group and returns a function
// that receives what is visible on topic now, one message a call, with
// auto-renewal, and the consumer's context.
func pushReceiver(t *testing.T, e *env, group, topic string) (func() []*pb.Message, context.Context) {
	t.Helper()
	return pushReceiverWith(t, e, group, topic, nil)
}

// pushReceiverWith is pushReceiver whose receives also ask for an
// invisible duration, as the C++ push consumer's do (30 s).
func pushReceiverWith(t *testing.T, e *env, group, topic string, invisible *durationpb.Duration) (func() []*pb.Message, context.Context) {
	t.Helper()
	c := ctx(t)
	st := &pb.Settings{ClientType: pb.ClientType_PUSH_CONSUMER.Enum(), PubSub: &pb.Settings_Subscription{Subscription: &pb.Subscription{Group: res(group)}}}
	if r := telemetry(t, e, c, st); r.Status.GetCode() != pb.Code_OK {
		t.Fatal(r.Status)
	}
	receive := func() []*pb.Message {
		s, err := e.cl.ReceiveMessage(c, &pb.ReceiveMessageRequest{Group: res(group), MessageQueue: &pb.MessageQueue{Topic: res(topic), Id: -1},
			BatchSize: 1, AutoRenew: true, InvisibleDuration: invisible, LongPollingTimeout: durationpb.New(0)})
		if err != nil {
			t.Fatal(err)
		}
		var msgs []*pb.Message
		for {
			r, err := s.Recv()
			if err != nil {
				return msgs
			}
			if m := r.GetMessage(); m != nil {
				msgs = append(msgs, m)
			}
		}
	}
	return receive, c
}

// TestAutoRenewWhileSessionLives: a push consumer's receive (auto_renew)
// keeps its messages invisible while its session lives, whether it names
// an invisible duration (the C++ client's 30 s, which RocketMQ's proxy
// ignores for such a receive) or not (Java, Go, Node), and no longer
// once the consumer has gone.
func TestAutoRenewWhileSessionLives(t *testing.T) {
	for name, invisible := range map[string]*durationpb.Duration{"no-duration": nil, "cpp-duration": durationpb.New(30 * time.Second)} {
		t.Run(name, func(t *testing.T) { testAutoRenew(t, invisible) })
	}
}

func testAutoRenew(t *testing.T, invisible *durationpb.Duration) {
	clk := &clock{t: time.Now()}
	e := start(t, func(c *server.Config) { c.GRPC.Now = clk.Now })
	topic, group := brokertest.Name("Renew"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	receive, c := pushReceiverWith(t, e, group, topic, invisible)
	e.send(t, msg(topic, "r1", "t", "held"))
	got := receive()
	if len(got) != 1 {
		t.Fatalf("%d messages", len(got))
	}
	clk.Add(45 * time.Second) // past the 30 s invisible time
	if again := receive(); len(again) != 0 {
		t.Fatalf("redelivered while its consumer lives: %v", again)
	}
	if code := e.ack(t, group, topic, got[0], got[0].SystemProperties.GetReceiptHandle()); code != pb.Code_OK {
		t.Fatalf("ack after renewal: %v", code)
	}

	e.send(t, msg(topic, "r2", "t", "dropped"))
	got = receive()
	if len(got) != 1 {
		t.Fatalf("%d messages", len(got))
	}
	if n, _ := e.cl.NotifyClientTermination(c, &pb.NotifyClientTerminationRequest{Group: res(group)}); n.Status.GetCode() != pb.Code_OK {
		t.Fatal(n.Status)
	}
	clk.Add(45 * time.Second)
	_, again := e.receive(t, group, topic, nil, 1, time.Minute, 0)
	if len(again) != 1 || again[0].SystemProperties.GetDeliveryAttempt() != 2 {
		t.Fatalf("after its consumer left: %v", again)
	}
}

func TestForwardToDeadLetterQueue(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Forward"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	e.send(t, msg(topic, "fw", "t", "give up"))
	_, msgs := e.receive(t, group, topic, nil, 1, 30*time.Second, time.Second)
	if len(msgs) != 1 {
		t.Fatalf("%d messages", len(msgs))
	}
	h := msgs[0].SystemProperties.GetReceiptHandle()
	forward := func(handle string) pb.Code {
		r, err := e.cl.ForwardMessageToDeadLetterQueue(ctx(t), &pb.ForwardMessageToDeadLetterQueueRequest{Group: res(group), Topic: res(topic),
			ReceiptHandle: handle, MessageId: "fw", DeliveryAttempt: 1, MaxDeliveryAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status.GetCode()
	}
	if code := forward(h); code != pb.Code_OK {
		t.Fatalf("forward: %v", code)
	}
	if code := forward(h); code != pb.Code_INVALID_RECEIPT_HANDLE {
		t.Fatalf("second forward: %v", code)
	}
	if code := e.ack(t, group, topic, msgs[0], h); code != pb.Code_INVALID_RECEIPT_HANDLE {
		t.Fatalf("ack after forward: %v", code)
	}
	// The dead letter is readable over gRPC too, marked as one.
	dlq := broker.DLQGroupTopicPrefix + group
	_, dead := e.receive(t, brokertest.Name("dlq-reader"), dlq, nil, 1, 30*time.Second, time.Second)
	if len(dead) != 1 || string(dead[0].Body) != "give up" || dead[0].SystemProperties.GetDeadLetterQueue().GetTopic() != topic {
		t.Fatalf("dead letter: %v", dead)
	}
}

func TestNamespaces(t *testing.T) {
	e := start(t)
	name := brokertest.Name("Spaced")
	e.createTopic(t, name, 1)
	nsTopic := &pb.Resource{ResourceNamespace: "tenant1", Name: name}
	m := msg(name, "ns-1", "t", "namespaced")
	m.Topic = nsTopic
	e.send(t, m) // auto-creates tenant1%<name>
	if _, ok := e.Broker.Topic("tenant1%" + name); !ok {
		t.Fatal("namespaced topic not created")
	}
	st, err := e.cl.ReceiveMessage(ctx(t), &pb.ReceiveMessageRequest{Group: &pb.Resource{ResourceNamespace: "tenant1", Name: "g"},
		MessageQueue: &pb.MessageQueue{Topic: nsTopic}, BatchSize: 1, InvisibleDuration: durationpb.New(time.Minute), LongPollingTimeout: durationpb.New(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	var got *pb.Message
	for {
		r, err := st.Recv()
		if err != nil {
			break
		}
		if r.GetMessage() != nil {
			got = r.GetMessage()
		}
	}
	if got == nil || string(got.Body) != "namespaced" || got.Topic.GetResourceNamespace() != "tenant1" || got.Topic.GetName() != name {
		t.Fatalf("namespaced receive: %v", got)
	}
	// The topic of the same name outside the namespace is another one.
	if _, msgs := e.receive(t, "g", name, nil, 1, time.Minute, 0); len(msgs) != 0 {
		t.Fatalf("message leaked out of its namespace: %v", msgs)
	}
}

func TestTopicRecreatedStartsOver(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Recreated"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	for i := range 3 {
		e.send(t, msg(topic, "old"+itoa(int32(i)), "t", "old"))
	}
	_, msgs := e.receive(t, group, topic, nil, 32, time.Minute, time.Second)
	for _, m := range msgs {
		e.ack(t, group, topic, m, m.SystemProperties.GetReceiptHandle())
	}
	if err := e.Broker.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	e.createTopic(t, topic, 1)
	// More new messages than the old cursor passed: none may be skipped.
	for i := range 5 {
		e.send(t, msg(topic, "new"+itoa(int32(i)), "t", "new"))
	}
	_, msgs = e.receive(t, group, topic, nil, 32, time.Minute, 5*time.Second)
	if len(msgs) != 5 {
		t.Fatalf("after the topic was recreated: %d messages, want 5", len(msgs))
	}
	for _, m := range msgs {
		if string(m.Body) != "new" || m.SystemProperties.GetDeliveryAttempt() != 1 {
			t.Fatalf("after the topic was recreated: %v", m)
		}
	}
}

func TestReceiveAttemptReplayed(t *testing.T) {
	e := start(t)
	topic, group := brokertest.Name("Attempt"), brokertest.Name("g")
	e.createTopic(t, topic, 1)
	e.send(t, msg(topic, "a", "t", "once"))
	receive := func(attempt string) []*pb.Message {
		s, err := e.cl.ReceiveMessage(ctx(t), &pb.ReceiveMessageRequest{Group: res(group), MessageQueue: &pb.MessageQueue{Topic: res(topic), Id: -1},
			BatchSize: 8, AutoRenew: true, AttemptId: &attempt, LongPollingTimeout: durationpb.New(0)})
		if err != nil {
			t.Fatal(err)
		}
		var msgs []*pb.Message
		for {
			r, err := s.Recv()
			if err != nil {
				return msgs
			}
			if m := r.GetMessage(); m != nil {
				msgs = append(msgs, m)
			}
		}
	}
	first := receive("attempt-1")
	if len(first) != 1 {
		t.Fatalf("%d messages", len(first))
	}
	// The client retries the same attempt (its answer was lost).
	again := receive("attempt-1")
	if len(again) != 1 || again[0].SystemProperties.GetReceiptHandle() != first[0].SystemProperties.GetReceiptHandle() {
		t.Fatalf("replayed attempt: %v", again)
	}
	if other := receive("attempt-2"); len(other) != 0 {
		t.Fatalf("a new attempt got %v", other)
	}
	if code := e.ack(t, group, topic, again[0], again[0].SystemProperties.GetReceiptHandle()); code != pb.Code_OK {
		t.Fatal(code)
	}
	if after := receive("attempt-1"); len(after) != 0 {
		t.Fatalf("acknowledged message replayed: %v", after)
	}
}

// TestConnectionCap serves at most MaxConns connections: a client over the
// cap gets no answer until a served connection closes.
func TestConnectionCap(t *testing.T) {
	first := start(t, func(c *server.Config) { c.GRPC.MaxConns = 1 })
	call := func(e *env, d time.Duration) error {
		c, cancel := context.WithTimeout(ctx(t), d)
		defer cancel()
		_, err := e.cl.QueryRoute(c, &pb.QueryRouteRequest{Topic: res("Capped")})
		return err
	}
	if err := call(first, 10*time.Second); err != nil {
		t.Fatalf("the first connection: %v", err)
	}
	conn, err := grpc.NewClient(first.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	second := &env{Env: first.Env, cl: pb.NewMessagingServiceClient(conn)}
	if err := call(second, 500*time.Millisecond); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a second connection over the cap of 1: %v, want no answer (deadline exceeded)", err)
	}
	first.conn.Close()
	if err := call(second, 10*time.Second); err != nil {
		t.Fatalf("the second connection after the first closed: %v", err)
	}
}

// TestLargestMessageThroughWindows: a message of the largest body the
// broker takes, several times the port's fixed flow-control windows,
// crosses them and is stored whole.
func TestLargestMessageThroughWindows(t *testing.T) {
	e := start(t)
	topic := brokertest.Name("Big")
	e.createTopic(t, topic, 1)
	body := make([]byte, broker.DefaultMaxMessageSize)
	for i := range body {
		body[i] = byte(i * 7)
	}
	m := msg(topic, "big", "t", "")
	m.Body = body
	e.send(t, m)
	rec, err := e.Broker.View().MessageAt(topic, 0, 0)
	if err != nil || !bytes.Equal(rec.Body(), body) {
		t.Fatalf("stored: %v, %d bytes, want the %d sent", err, len(rec.Body()), len(body))
	}
}
