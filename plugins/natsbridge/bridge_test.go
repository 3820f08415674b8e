package natsbridge_test

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/core/store/storetest"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/plugins/natsbridge"
)

func TestPublishSubjectsAndHeaders(t *testing.T) {
	ns := runNATS(t)
	src := newFakeSource()
	opts := testOptions(ns, src)
	opts.Properties = []string{"color", "absent"}
	b := startBridge(t, opts)

	src.add(
		event(outbox.KindRetry, "CID_ORDER", "TopicTest", 0),
		event(outbox.KindDLQ, "CID_ORDER", "TopicTest", 1),
		event(outbox.KindRetry, "g.with dots", "t%1*>", 2),
	)
	waitCursor(t, b, 3, 10*time.Second)

	_, js := ns.client(t)
	msgs := streamMsgs(t, js, natsbridge.DefaultStream)
	if len(msgs) != 3 {
		t.Fatalf("stream holds %d messages, want 3", len(msgs))
	}
	wantSubj := []string{
		"rmq.DefaultCluster.retry.CID_ORDER.TopicTest",
		"rmq.DefaultCluster.dlq.CID_ORDER.TopicTest",
		"rmq.DefaultCluster.retry.g~2Ewith~20dots.t%1~2A~3E",
	}
	for i, m := range msgs {
		if m.Subject != wantSubj[i] {
			t.Errorf("message %d: subject %q, want %q", i, m.Subject, wantSubj[i])
		}
		h := m.Header
		want := event([]string{outbox.KindRetry, outbox.KindDLQ, outbox.KindRetry}[i], "", "", i)
		checks := map[string]string{
			natsbridge.HeaderMsgID:                 "DefaultCluster-broker-a-" + b.Status().Epoch + "-" + strconv.Itoa(i),
			natsbridge.HeaderEvent:                 want.Kind,
			natsbridge.HeaderRmqMsgID:              want.MsgID,
			natsbridge.HeaderOriginMsgID:           want.OriginMsgID,
			natsbridge.HeaderKeys:                  want.Keys,
			natsbridge.HeaderTags:                  "TagA",
			natsbridge.HeaderQueueID:               strconv.Itoa(i % 4),
			natsbridge.HeaderQueueOffset:           strconv.Itoa(i),
			natsbridge.HeaderReconsumeTimes:        strconv.Itoa(i%3 + 1),
			natsbridge.HeaderMaxReconsumeTimes:     "3",
			natsbridge.HeaderReason:                "test",
			natsbridge.HeaderPropPrefix + "color":  "blue",
			natsbridge.HeaderPropPrefix + "absent": "",
			natsbridge.HeaderBodyTruncated:         "",
		}
		if want.Kind == outbox.KindRetry {
			checks[natsbridge.HeaderDelayLevel] = "4"
			checks[natsbridge.HeaderNextAttemptAt] = want.NextAttemptAt.UTC().Format(natsbridge.TimeFormat)
		} else {
			checks[natsbridge.HeaderDelayLevel] = ""
			checks[natsbridge.HeaderNextAttemptAt] = ""
		}
		for k, v := range checks {
			if got := h.Get(k); got != v {
				t.Errorf("message %d: header %s = %q, want %q", i, k, got, v)
			}
		}
		if _, err := time.Parse(natsbridge.TimeFormat, h.Get(natsbridge.HeaderEventTime)); err != nil {
			t.Errorf("message %d: event time %q: %v", i, h.Get(natsbridge.HeaderEventTime), err)
		}
		if string(m.Data) != fmt.Sprintf("body-%d", i) {
			t.Errorf("message %d: body %q", i, m.Data)
		}
	}
	// Raw names travel in headers; subjects decode back to them.
	if g := msgs[2].Header.Get(natsbridge.HeaderGroup); g != "g.with dots" {
		t.Errorf("group header %q", g)
	}
	tok := strings.Split(msgs[2].Subject, ".")
	if g, err := natsbridge.UnescapeToken(tok[3]); err != nil || g != "g.with dots" {
		t.Errorf("group token %q decodes to %q, %v", tok[3], g, err)
	}
	st := b.Status()
	if st.Published != 3 || st.Duplicates != 0 || st.LagEvents != 0 || st.InFlight != 0 || st.Connection != "CONNECTED" {
		t.Errorf("status %+v", st)
	}
	if v, ok := src.durableValue("natsbridge/cursor"); !ok || v != 3 {
		brokertest.Eventually(t, 5*time.Second, "the cursor to be written", func() bool {
			v, _ := src.durableValue("natsbridge/cursor")
			return v == 3
		})
	}
}

func TestBodyCapAndMissingBody(t *testing.T) {
	ns := runNATS(t)
	src := newFakeSource()
	opts := testOptions(ns, src)
	opts.BodyCap = 10
	b := startBridge(t, opts)
	big := event(outbox.KindDLQ, "g", "t", 0)
	big.Body = []byte(strings.Repeat("x", 100))
	gone := event(outbox.KindDLQ, "g", "t", 1)
	gone.Body = nil
	src.add(big, gone)
	waitCursor(t, b, 2, 10*time.Second)
	_, js := ns.client(t)
	msgs := streamMsgs(t, js, natsbridge.DefaultStream)
	if len(msgs) != 2 {
		t.Fatalf("%d messages", len(msgs))
	}
	if len(msgs[0].Data) != 10 || msgs[0].Header.Get(natsbridge.HeaderBodyTruncated) != "100" {
		t.Errorf("capped body: %d bytes, truncated header %q", len(msgs[0].Data), msgs[0].Header.Get(natsbridge.HeaderBodyTruncated))
	}
	if len(msgs[1].Data) != 0 || msgs[1].Header.Get(natsbridge.HeaderBodyMissing) != "true" {
		t.Errorf("missing body: %q, header %q", msgs[1].Data, msgs[1].Header.Get(natsbridge.HeaderBodyMissing))
	}
}

func TestFilters(t *testing.T) {
	ns := runNATS(t)
	src := newFakeSource()
	opts := testOptions(ns, src)
	opts.Kinds = []string{outbox.KindDLQ}
	opts.IncludeGroups = []string{"orders-*"}
	opts.ExcludeTopics = []string{"noisy"}
	b := startBridge(t, opts)
	src.add(
		event(outbox.KindDLQ, "orders-a", "t", 0),   // published
		event(outbox.KindRetry, "orders-a", "t", 1), // kind left out
		event(outbox.KindDLQ, "billing", "t", 2),    // group not included
		event(outbox.KindDLQ, "orders-b", "noisy", 3),
		event(outbox.KindDLQ, "orders-b", "t", 4), // published
	)
	waitCursor(t, b, 5, 10*time.Second)
	_, js := ns.client(t)
	msgs := streamMsgs(t, js, natsbridge.DefaultStream)
	if len(msgs) != 2 || msgs[0].Header.Get(natsbridge.HeaderRmqMsgID) != "MSG000000" || msgs[1].Header.Get(natsbridge.HeaderRmqMsgID) != "MSG000004" {
		t.Fatalf("published %d messages: %v", len(msgs), msgs)
	}
	if st := b.Status(); st.Filtered != 3 || st.Published != 2 {
		t.Errorf("status %+v", st)
	}
}

// TestOutage stops the NATS server while 10k events are added, starts it
// again, and expects every event in the stream exactly once.
func TestOutage(t *testing.T) {
	const total = 10_000
	ns := runNATS(t)
	src := newFakeSource()
	opts := testOptions(ns, src)
	var logs storetest.LogBuffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	b := startBridge(t, opts)

	for i := range total / 10 {
		src.add(event(outbox.KindRetry, "g", "t", i))
	}
	waitCursor(t, b, total/10, 10*time.Second)
	// Stop the server with publishes in flight.
	for i := total / 10; i < total/2; i++ {
		src.add(event(outbox.KindRetry, "g", "t", i))
		if i == total/5 {
			ns.stop()
		}
	}
	brokertest.Eventually(t, 10*time.Second, "the bridge to notice the outage", func() bool {
		return b.Status().Failures > 0
	})
	for i := total / 2; i < total; i++ {
		src.add(event(outbox.KindRetry, "g", "t", i))
	}
	st := b.Status()
	if st.LagEvents == 0 || st.Cursor >= total {
		t.Fatalf("no lag during the outage: %+v", st)
	}
	t.Logf("during the outage: %+v", st)
	// The status and the log name the outage, not what the client said
	// when a publish failed during it.
	if !strings.HasPrefix(st.LastError, "NATS unreachable since ") || !strings.HasSuffix(st.LastError, fmt.Sprintf(", %d events waiting", st.LagEvents)) ||
		st.UnreachableSince.IsZero() {
		t.Errorf("status during the outage: last error %q, unreachable since %v", st.LastError, st.UnreachableSince)
	}
	if l := logs.String(); !strings.Contains(l, "NATS unreachable; publishing paused") || strings.Contains(l, "buffer limit") {
		t.Errorf("log during the outage:\n%s", l)
	}
	ns.start()
	waitCursor(t, b, total, 60*time.Second)
	_, js := ns.client(t)
	if n := streamCount(t, js, natsbridge.DefaultStream); n != total {
		t.Fatalf("stream holds %d messages, want %d", n, total)
	}
	st = b.Status()
	if !st.UnreachableSince.IsZero() || strings.Contains(st.LastError, "since") {
		t.Errorf("status after the outage: last error %q, unreachable since %v", st.LastError, st.UnreachableSince)
	}
	if st.Published+st.Duplicates < total || st.Expired != 0 {
		t.Errorf("status %+v", st)
	}
	t.Logf("after the outage: published %d, duplicates %d, failures %d", st.Published, st.Duplicates, st.Failures)
	// In order: stream sequence follows the outbox offset.
	msgs := streamMsgs(t, js, natsbridge.DefaultStream)
	for i, m := range msgs {
		if want := fmt.Sprintf("MSG%06d", i); m.Header.Get(natsbridge.HeaderRmqMsgID) != want {
			t.Fatalf("message %d is %s", i, m.Header.Get(natsbridge.HeaderRmqMsgID))
		}
	}
}

// TestRestartResumes stops the bridge mid-stream and starts a new one on
// the same outbox: nothing is lost, and the republished tail is dropped
// as duplicates.
func TestRestartResumes(t *testing.T) {
	const total = 5000
	ns := runNATS(t)
	src := newFakeSource()
	opts := testOptions(ns, src)
	b1, err := natsbridge.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := b1.Start(); err != nil {
		t.Fatal(err)
	}
	for i := range total / 2 {
		src.add(event(outbox.KindDLQ, "g", "t", i))
	}
	waitCursor(t, b1, total/4, 10*time.Second)
	stopBridge(t, b1)
	saved, ok := src.durableValue("natsbridge/cursor")
	if !ok || saved != b1.Status().Cursor {
		t.Fatalf("cursor written at shutdown: %d, %v; status %d", saved, ok, b1.Status().Cursor)
	}
	// A crash loses counters that were not flushed; Shutdown flushed.
	src.crash()
	epoch := b1.Status().Epoch
	for i := total / 2; i < total; i++ {
		src.add(event(outbox.KindDLQ, "g", "t", i))
	}
	b2 := startBridge(t, opts)
	if b2.Status().Epoch != epoch {
		t.Fatalf("epoch changed across a restart: %s → %s", epoch, b2.Status().Epoch)
	}
	if c := b2.Status().Cursor; c < saved {
		t.Fatalf("resumed at %d, before the saved cursor %d", c, saved)
	}
	waitCursor(t, b2, total, 30*time.Second)
	_, js := ns.client(t)
	if n := streamCount(t, js, natsbridge.DefaultStream); n != total {
		t.Fatalf("stream holds %d messages, want %d", n, total)
	}
}

// TestCrashReplaysAsDuplicates rewinds the durable cursor, as a crash
// before the last cursor write would, and expects the replay deduplicated.
func TestCrashReplaysAsDuplicates(t *testing.T) {
	ns := runNATS(t)
	src := newFakeSource()
	opts := testOptions(ns, src)
	b1 := startBridge(t, opts)
	for i := range 100 {
		src.add(event(outbox.KindDLQ, "g", "t", i))
	}
	waitCursor(t, b1, 100, 10*time.Second)
	stopBridge(t, b1)
	src.SetProgress("natsbridge/cursor", 40)
	src.FlushProgress()
	b2 := startBridge(t, opts)
	waitCursor(t, b2, 100, 10*time.Second)
	_, js := ns.client(t)
	if n := streamCount(t, js, natsbridge.DefaultStream); n != 100 {
		t.Fatalf("stream holds %d, want 100", n)
	}
	if st := b2.Status(); st.Duplicates != 60 || st.Published != 0 {
		t.Fatalf("status %+v, want 60 duplicates", st)
	}
}

// TestExpiredUnpublished lets retention pass the cursor during an outage.
func TestExpiredUnpublished(t *testing.T) {
	ns := runNATS(t)
	src := newFakeSource()
	b := startBridge(t, testOptions(ns, src))
	src.add(event(outbox.KindDLQ, "g", "t", 0))
	waitCursor(t, b, 1, 10*time.Second)
	ns.stop()
	for i := 1; i < 50; i++ {
		src.add(event(outbox.KindDLQ, "g", "t", i))
	}
	brokertest.Eventually(t, 10*time.Second, "the bridge to notice the outage", func() bool {
		return b.Status().Failures > 0
	})
	src.trim(30) // 1..29 expire unpublished
	ns.start()
	waitCursor(t, b, 50, 20*time.Second)
	st := b.Status()
	if st.Expired != 29 {
		t.Fatalf("expired %d, want 29 (%+v)", st.Expired, st)
	}
	_, js := ns.client(t)
	if n := streamCount(t, js, natsbridge.DefaultStream); n != 21 {
		t.Fatalf("stream holds %d, want 21", n)
	}
}

// TestStartBelowRetention starts with a cursor retention already passed.
func TestStartBelowRetention(t *testing.T) {
	ns := runNATS(t)
	src := newFakeSource()
	for i := range 10 {
		src.add(event(outbox.KindDLQ, "g", "t", i))
	}
	src.SetProgress("natsbridge/cursor", 2)
	src.trim(6)
	b := startBridge(t, testOptions(ns, src))
	waitCursor(t, b, 10, 10*time.Second)
	if st := b.Status(); st.Expired != 4 || st.Published != 4 {
		t.Fatalf("status %+v", st)
	}
}

// TestWrongStream publishes to a subject another stream captures: nothing
// advances until the expected stream exists.
func TestWrongStream(t *testing.T) {
	ns := runNATS(t)
	_, js := ns.client(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OTHER", Subjects: []string{"rmq.>"}}); err != nil {
		t.Fatal(err)
	}
	src := newFakeSource()
	opts := testOptions(ns, src)
	opts.Provision = false
	b := startBridge(t, opts)
	src.add(event(outbox.KindDLQ, "g", "t", 0))
	brokertest.Eventually(t, 10*time.Second, "a failure", func() bool { return b.Status().Failures > 0 })
	st := b.Status()
	if st.Cursor != 0 || !strings.Contains(st.LastError, "stream") {
		t.Fatalf("status %+v", st)
	}
	// Fix the setup: the bridge catches up by itself.
	if err := js.DeleteStream(ctx, "OTHER"); err != nil {
		t.Fatal(err)
	}
	// nats-server has failed this creation, right after the deletion,
	// once in a loaded run (10049, "error creating store for stream",
	// its cause in a log the test does not keep); the step only sets the
	// stage, so it is tried again until it is done.
	var createErr error
	brokertest.Eventually(t, 10*time.Second, "the bridge's stream created", func() bool {
		_, createErr = js.CreateStream(ctx, jetstream.StreamConfig{Name: natsbridge.DefaultStream, Subjects: []string{"rmq.>"}})
		if createErr != nil {
			t.Logf("create stream: %v", createErr)
		}
		return createErr == nil
	})
	waitCursor(t, b, 1, 10*time.Second)
}

func TestCoreMode(t *testing.T) {
	ns := runNATS(t)
	nc, _ := ns.client(t)
	got := make(chan *nats.Msg, 100)
	sub, err := nc.ChanSubscribe("rmq.DefaultCluster.>", got)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	nc.Flush()
	src := newFakeSource()
	opts := testOptions(ns, src)
	opts.Mode, opts.Provision = natsbridge.ModeCore, false
	b := startBridge(t, opts)
	for i := range 20 {
		src.add(event(outbox.KindRetry, "g", "t", i))
	}
	for i := range 20 {
		m := brokertest.Wait(t, got, 10*time.Second, "a core message")
		if want := fmt.Sprintf("MSG%06d", i); m.Header.Get(natsbridge.HeaderRmqMsgID) != want {
			t.Fatalf("message %d is %s", i, m.Header.Get(natsbridge.HeaderRmqMsgID))
		}
		if m.Header.Get(jetstream.ExpectedStreamHeader) != "" {
			t.Fatal("core mode sent an expected stream")
		}
	}
	waitCursor(t, b, 20, 10*time.Second)
	if st := b.Status(); st.Published != 20 {
		t.Fatalf("status %+v", st)
	}
}

// TestShutdownWhileDown shuts the bridge down while NATS is unreachable:
// Shutdown returns promptly and the cursor is written.
func TestShutdownWhileDown(t *testing.T) {
	ns := runNATS(t)
	ns.stop()
	src := newFakeSource()
	b, err := natsbridge.New(testOptions(ns, src))
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatalf("start with NATS down: %v", err)
	}
	src.add(event(outbox.KindDLQ, "g", "t", 0))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Fatalf("shutdown took %v", d)
	}
	if v, ok := src.durableValue("natsbridge/cursor"); !ok || v != 0 {
		t.Fatalf("cursor %d, %v", v, ok)
	}
}

func TestOptionsValidation(t *testing.T) {
	src := newFakeSource()
	for _, c := range []struct {
		name string
		mut  func(*natsbridge.Options)
		want []string
	}{
		{"no source", func(o *natsbridge.Options) { o.Source = nil }, []string{"Source is required"}},
		{"no urls", func(o *natsbridge.Options) { o.URLs = nil }, []string{"NATS URL is required"}},
		{"two auths", func(o *natsbridge.Options) { o.Token, o.CredsFile = "x", "y" }, []string{"choose one"}},
		{"user alone", func(o *natsbridge.Options) { o.User = "u" }, []string{"user and password go together"}},
		{"bad mode", func(o *natsbridge.Options) { o.Mode = "kafka" }, []string{`mode "kafka"`}},
		{"core with stream", func(o *natsbridge.Options) { o.Mode, o.Stream, o.Provision = natsbridge.ModeCore, "S", true },
			[]string{"only in jetstream mode", "needs jetstream mode"}},
		{"bad stream", func(o *natsbridge.Options) { o.Stream = "a.b" }, []string{`stream "a.b"`}},
		{"bad prefix", func(o *natsbridge.Options) { o.SubjectPrefix = "a..b" }, []string{"subject prefix"}},
		{"bad kind", func(o *natsbridge.Options) { o.Kinds = []string{"oops"} }, []string{`event kind "oops"`}},
		{"bad pattern", func(o *natsbridge.Options) { o.IncludeGroups = []string{"[a"} }, []string{"includeGroups pattern"}},
		{"bad property", func(o *natsbridge.Options) { o.Properties = []string{"a b"} }, []string{"cannot be a header name"}},
		{"window", func(o *natsbridge.Options) { o.MaxInFlight = -1 }, []string{"max in flight"}},
		{"dup window", func(o *natsbridge.Options) { o.DuplicateWindow, o.StreamMaxAge = time.Hour, time.Minute }, []string{"duplicate window"}},
		{"resend", func(o *natsbridge.Options) { o.Resend = true }, []string{"Resender"}},
		{"names", func(o *natsbridge.Options) { o.Cluster, o.Broker = "", "" }, []string{"cluster name is required", "broker name is required"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := natsbridge.Options{Source: src, URLs: []string{"nats://127.0.0.1:1"}, Cluster: "c", Broker: "b", Provision: true}
			c.mut(&o)
			_, err := natsbridge.New(o)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	if _, err := natsbridge.New(natsbridge.Options{Source: src, URLs: []string{"nats://x:1"}, Cluster: "c", Broker: "b"}); err != nil {
		t.Fatalf("minimal options refused: %v", err)
	}
}

func TestStartErrors(t *testing.T) {
	src := newFakeSource()
	o := natsbridge.Options{Source: src, URLs: []string{"nats://127.0.0.1:1"}, Cluster: "c", Broker: "b",
		CredsFile: "/nonexistent/x.creds", Logger: brokertest.Logger()}
	b, err := natsbridge.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err == nil || !strings.Contains(err.Error(), "credentials file") {
		t.Fatalf("start: %v", err)
	}
}

// TestSubjectsSubscribedAsDocumented subscribes the way doc.go tells users
// to: with the raw names for every name the broker accepts, and with the
// ~XX escapes for the bytes NATS cannot carry in a token.
func TestSubjectsSubscribedAsDocumented(t *testing.T) {
	ns := runNATS(t)
	nc, _ := ns.client(t)
	src := newFakeSource()
	opts := testOptions(ns, src)
	opts.Cluster = "prod.eu"
	cases := []struct{ group, topic, subject string }{
		{"GID_2024", "Orders_01", "rmq.prod~2Eeu.retry.GID_2024.Orders_01"},
		{"CID_A1", "T_FF", "rmq.prod~2Eeu.retry.CID_A1.T_FF"},
		{"%SYS%g", "a|b", "rmq.prod~2Eeu.retry.%SYS%g.a|b"},
		{"g.with.dots", "t*", "rmq.prod~2Eeu.retry.g~2Ewith~2Edots.t~2A"},
	}
	subs := make([]*nats.Subscription, len(cases))
	for i, c := range cases {
		sub, err := nc.SubscribeSync(c.subject)
		if err != nil {
			t.Fatalf("subscribe %q: %v", c.subject, err)
		}
		subs[i] = sub
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, opts)
	for i, c := range cases {
		src.add(event(outbox.KindRetry, c.group, c.topic, i))
	}
	waitCursor(t, b, int64(len(cases)), 10*time.Second)
	for i, c := range cases {
		m, err := subs[i].NextMsg(5 * time.Second)
		if err != nil {
			t.Errorf("group %q topic %q: nothing on %q: %v", c.group, c.topic, c.subject, err)
			continue
		}
		if g := m.Header.Get(natsbridge.HeaderGroup); g != c.group {
			t.Errorf("subject %q carried group %q, want %q", c.subject, g, c.group)
		}
		if got := natsbridge.Subject("rmq", "prod.eu", outbox.KindRetry, c.group, c.topic); got != c.subject {
			t.Errorf("Subject(%q, %q) = %q, want %q", c.group, c.topic, got, c.subject)
		}
	}
}

// TestEpochOutlivesLostCounters starts a bridge on a source that lost its
// counters but kept its records, as the next leader of a replicated set
// finds them when the leader that created the epoch died before its
// checkpoint reached the others: the epoch, kept as a record, is the same,
// so republished events keep their message ids.
func TestEpochOutlivesLostCounters(t *testing.T) {
	ns := runNATS(t)
	res := newFakeResender()
	opts := testOptions(ns, newFakeSource())
	opts.Resender = res
	b1 := startBridge(t, opts)
	epoch := b1.Status().Epoch
	stopBridge(t, b1)

	opts.Source = newFakeSource() // no counters: neither cursor nor epoch
	b2 := startBridge(t, opts)
	if got := b2.Status().Epoch; got != epoch {
		t.Fatalf("epoch %s after the counters were lost, want %s", got, epoch)
	}
}
