package metrics_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/rmq-go/rmq/client"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/metrics"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
	"github.com/rmq-go/rmq/internal/server"
)

// scrape fetches /metrics over HTTP and parses it.
func scrape(t testing.TB, env *brokertest.Env) (map[string]*dto.MetricFamily, []byte) {
	t.Helper()
	resp, err := http.Get("http://" + env.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams, body
}

// value returns the value of the series of family name whose labels
// include labels (name, value pairs), summed over the matching series,
// and how many matched. A histogram's value is its sample count.
func value(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, int) {
	f := fams[name]
	if f == nil {
		return 0, 0
	}
	var sum float64
	n := 0
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, l := range m.Label {
				if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		n++
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum, n
}

func newProducer(t testing.TB, env *brokertest.Env) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(client.ProducerOptions{
		Client: client.ClientOptions{NameServers: []string{env.NamesrvAddr}, InstanceName: brokertest.Name("p")},
		Group:  brokertest.Name("PG"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	return p
}

// TestScrapeAfterTraffic produces and consumes known traffic against an
// in-process broker and checks what /metrics says about it.
func TestScrapeAfterTraffic(t *testing.T) {
	const topic, sent, size = "MetricsTopic", 20, 100
	env := brokertest.Start(t, func(c *server.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.Broker.Topics = []broker.TopicOptions{{Name: topic, Queues: 2}}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	p := newProducer(t, env)
	for i := range sent {
		if _, err := p.SendSync(ctx, client.NewMessage(topic, bytes.Repeat([]byte{'a' + byte(i%26)}, size))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}

	group := brokertest.Name("MG")
	c, err := client.NewLitePullConsumer(client.LitePullOptions{
		ConsumerOptions: client.ConsumerOptions{
			Client: client.ClientOptions{NameServers: []string{env.NamesrvAddr}, InstanceName: brokertest.Name("c")},
			Group:  group, ConsumeFrom: client.ConsumeFromFirstOffset,
		},
		ManualCommit: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Assign(nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown(context.Background()) })
	qs, err := c.FetchQueues(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Assign(qs); err != nil {
		t.Fatal(err)
	}
	// Consume it all and commit, then produce more: the lag is what was
	// produced after the commit, whatever the consumer prefetched since.
	for consumed := 0; consumed < sent; {
		msgs, err := c.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		consumed += len(msgs)
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	const more = 7
	for i := range more {
		if _, err := p.SendSync(ctx, client.NewMessage(topic, bytes.Repeat([]byte{'A' + byte(i)}, size))); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	const total = sent + more

	// The consumer prefetches what was sent after the commit: wait until
	// every message went out.
	var fams map[string]*dto.MetricFamily
	var body []byte
	brokertest.Eventually(t, 30*time.Second, "every message to be pulled", func() bool {
		fams, body = scrape(t, env)
		v, _ := value(fams, "rmq_topic_messages_out_total", "topic", topic)
		return v >= total
	})
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"rmq_topic_messages_in_total", []string{"topic", topic}, total},
		{"rmq_topic_bytes_in_total", []string{"topic", topic}, total * size},
		{"rmq_topic_messages_out_total", []string{"topic", topic}, total},
		{"rmq_topic_bytes_out_total", []string{"topic", topic}, total * size},
		{"rmq_consumer_lag_messages", []string{"group", group, "topic", topic}, total - sent}, // produced minus consumed
		{"rmq_send_duration_seconds", nil, total},                                             // the histogram's count
		{"rmq_store_messages_appended_total", nil, total},
	}
	for _, c := range checks {
		if got, n := value(fams, c.name, c.labels...); n == 0 || got != c.want {
			t.Errorf("%s%v = %v (%d series), want %v", c.name, c.labels, got, n, c.want)
		}
	}
	// Lag is per queue: one series for each of the topic's two queues.
	if _, n := value(fams, "rmq_consumer_lag_messages", "group", group, "topic", topic); n != 2 {
		t.Errorf("lag series for %s/%s: %d, want 2 (one per queue)", group, topic, n)
	}
	for _, h := range []string{"rmq_pull_duration_seconds", "rmq_store_round_messages", "rmq_store_fsync_duration_seconds", "rmq_store_fsync_bytes"} {
		if v, _ := value(fams, h); v == 0 {
			t.Errorf("histogram %s did not move", h)
		}
	}
	if _, n := value(fams, "rmq_clients"); n != 2 {
		t.Errorf("rmq_clients: %d series, want 2 (producer, consumer)", n)
	}
	if v, _ := value(fams, "rmq_connections"); v < 1 {
		t.Errorf("rmq_connections = %v, want at least 1", v)
	}
	// Caught up, the consumer long-polls: its pulls are held.
	brokertest.Eventually(t, 30*time.Second, "a held pull", func() bool {
		fams, _ := scrape(t, env)
		v, _ := value(fams, "rmq_held_pulls")
		return v >= 1
	})
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestCollectorLint lints the collector's own series, as registered.
func TestCollectorLint(t *testing.T) {
	env := brokertest.Start(t)
	c := metrics.New(metrics.Options{Store: env.Store, Broker: env.Broker, Plugins: env.PluginRegistry()})
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("pedantic registry: %v", err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("GatherAndLint: %v %v", problems, err)
	}
}

// TestCardinalityCap checks that topics and groups past the caps are
// summed into "_other", and that the names with series keep them.
func TestCardinalityCap(t *testing.T) {
	var topics []broker.TopicOptions
	for i := range 5 {
		topics = append(topics, broker.TopicOptions{Name: fmt.Sprintf("Cap%d", i), Queues: 1})
	}
	env := brokertest.Start(t, func(c *server.Config) { c.Broker.Topics = topics })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newProducer(t, env)
	for i, tc := range topics {
		for range i + 1 {
			if _, err := p.SendSync(ctx, client.NewMessage(tc.Name, []byte("x"))); err != nil {
				t.Fatal(err)
			}
		}
		for g := range 3 {
			if err := env.Store.CommitOffset(fmt.Sprintf("G%d", g), tc.Name, 0, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := metrics.New(metrics.Options{Store: env.Store, Broker: env.Broker, MaxTopics: 2, MaxGroups: 2})
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	gather := func() map[string]*dto.MetricFamily {
		fs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*dto.MetricFamily{}
		for _, f := range fs {
			out[f.GetName()] = f
		}
		return out
	}
	fams := gather()
	// Cap0 and Cap1 (1 and 2 messages) by name, Cap2..Cap4 (3+4+5) summed.
	for _, c := range []struct {
		topic string
		want  float64
	}{{"Cap0", 1}, {"Cap1", 2}, {metrics.Other, 12}} {
		if v, n := value(fams, "rmq_topic_messages_in_total", "topic", c.topic); n != 1 || v != c.want {
			t.Errorf("messages in for %s: %v (%d series), want %v", c.topic, v, n, c.want)
		}
	}
	if _, n := value(fams, "rmq_topic_messages_in_total"); n != 3 {
		t.Errorf("%d topic series, want 3 (two names and _other)", n)
	}
	// Lag: G0 and G1 by name, G2 folded; every lag is the topic's size.
	if v, _ := value(fams, "rmq_consumer_lag_messages", "group", metrics.Other); v != 15 {
		t.Errorf("lag of the folded group: %v, want 15", v)
	}
	if v, _ := value(fams, "rmq_consumer_lag_messages", "group", "G0", "topic", metrics.Other); v != 12 {
		t.Errorf("lag of G0 on folded topics: %v, want 12", v)
	}
	if v, _ := value(fams, "rmq_metrics_folded", "label", "topic"); v != 3 {
		t.Errorf("rmq_metrics_folded{label=topic} = %v, want 3", v)
	}

	// A name that had a series keeps it when a name sorting before it
	// appears; one that disappears frees its place.
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: "Cap", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SendSync(ctx, client.NewMessage("Cap", []byte("x"))); err != nil {
		t.Fatal(err)
	}
	fams = gather()
	if _, n := value(fams, "rmq_topic_messages_in_total", "topic", "Cap"); n != 0 {
		t.Error("a new topic took the place of one with a series")
	}
	if err := env.Broker.DeleteTopic("Cap1"); err != nil {
		t.Fatal(err)
	}
	fams = gather()
	if _, n := value(fams, "rmq_topic_messages_in_total", "topic", "Cap"); n != 1 {
		t.Error("a deleted topic's place was not given to the next")
	}
}

// BenchmarkScrape measures one scrape of a broker with 1,000 topics that
// had traffic and 100 consumer groups with offsets on 10 topics of 4
// queues each (4,000 lag series): the collector's reads and the text
// encoding, as /metrics does them.
func BenchmarkScrape(b *testing.B) {
	const topics, groups, topicsPerGroup, queues = 1000, 100, 10, 4
	env := brokertest.Start(b, func(c *server.Config) {
		c.Store.Flush = store.FlushAsync
		for i := range topics {
			c.Broker.Topics = append(c.Broker.Topics, broker.TopicOptions{Name: fmt.Sprintf("T%04d", i), Queues: queues})
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := newProducer(b, env)
	done := make(chan error, topics)
	for i := range topics {
		if err := p.SendAsync(ctx, func(_ *client.SendResult, err error) { done <- err }, client.NewMessage(fmt.Sprintf("T%04d", i), []byte("x"))); err != nil {
			b.Fatal(err)
		}
	}
	for range topics {
		if err := brokertest.Wait(b, done, time.Minute, "a send"); err != nil {
			b.Fatal(err)
		}
	}
	for g := range groups {
		for k := range topicsPerGroup {
			for q := range queues {
				env.Store.CommitOffset(fmt.Sprintf("G%03d", g), fmt.Sprintf("T%04d", (g*topicsPerGroup+k)%topics), int32(q), 0)
			}
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.New(metrics.Options{Store: env.Store, Broker: env.Broker}))
	var series int
	scrape := func() {
		fams, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		enc := expfmt.NewEncoder(io.Discard, expfmt.NewFormat(expfmt.TypeTextPlain))
		series = 0
		for _, f := range fams {
			series += len(f.Metric)
			if err := enc.Encode(f); err != nil {
				b.Fatal(err)
			}
		}
	}
	scrape()
	b.ReportAllocs()
	for b.Loop() {
		scrape()
	}
	b.ReportMetric(float64(series), "series")
	if series < topics*4+groups*topicsPerGroup*queues {
		b.Fatalf("%d series, want at least %d", series, topics*4+groups*topicsPerGroup*queues)
	}
}

// TestScrapeRetriesAndDelays checks the retry, dead-letter and delay
// series after a delayed send and two send-backs, one to the retry topic
// and one, past the limit, to the dead-letter topic.
func TestScrapeRetriesAndDelays(t *testing.T) {
	const topic, group = "DelayTopic", "RetryGroup"
	env := brokertest.Start(t, func(c *server.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.Broker.Topics = []broker.TopicOptions{{Name: topic, Queues: 1}}
	})
	env.KnowGroup(t, group)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newProducer(t, env)
	if _, err := p.SendSync(ctx, client.NewMessage(topic, []byte("later")).WithDelayLevel(5)); err != nil {
		t.Fatal(err)
	}
	res, err := p.SendSync(ctx, client.NewMessage(topic, []byte("fails")))
	if err != nil {
		t.Fatal(err)
	}
	_, off, err := message.ParseOffsetMsgID(res.OffsetMsgID)
	if err != nil {
		t.Fatal(err)
	}
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	sendBack := func(delayLevel string) {
		req := remoting.NewRequest(remoting.ConsumerSendMsgBack, map[string]string{
			"group": group, "offset": strconv.FormatInt(off, 10), "delayLevel": delayLevel, "maxReconsumeTimes": "16",
		}, nil)
		resp, err := cl.Invoke(ctx, env.BrokerAddr, req)
		if err != nil || resp.Code != remoting.Success {
			t.Fatalf("send back (delay level %s): %v %v", delayLevel, resp, err)
		}
	}
	sendBack("5")  // a retry, parked for a minute on delay level 5
	sendBack("-1") // straight to the dead-letter topic

	fams, _ := scrape(t, env)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"rmq_topic_messages_in_total", []string{"topic", topic}, 2},
		{"rmq_delayed_messages_pending", nil, 2}, // the delayed message and the retry
		{"rmq_retries_total", nil, 1},
		{"rmq_dead_letters_total", nil, 1},
		{"rmq_dlq_messages", []string{"group", group}, 1},
	} {
		if got, n := value(fams, c.name, c.labels...); n == 0 || got != c.want {
			t.Errorf("%s%v = %v (%d series), want %v", c.name, c.labels, got, n, c.want)
		}
	}

	// A timed message is pending from its send until it is due, whether
	// or not the scheduler has indexed it yet, and across a restart.
	due := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	if _, err := p.SendSync(ctx, client.NewMessage(topic, []byte("timed")).SetProperty(message.PropertyTimerDeliverMS, due)); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if i == 1 {
			env = env.Restart(t)
		}
		fams, _ := scrape(t, env)
		if got, n := value(fams, "rmq_timed_messages_pending"); n != 1 || got != 1 {
			t.Errorf("scrape %d: rmq_timed_messages_pending = %v (%d series), want 1", i+1, got, n)
		}
	}
}

// TestGRPCResponses: the gRPC endpoint's responses are counted by method
// and Status code, refusals included.
func TestGRPCResponses(t *testing.T) {
	env := brokertest.Start(t, func(c *server.Config) {
		c.HTTPListen, c.GRPCListen = "127.0.0.1:0", "127.0.0.1:0"
	})
	conn, err := grpc.NewClient(env.GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cl := pb.NewMessagingServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(t.Context(), "x-mq-client-id", brokertest.Name("metrics-grpc"), "x-mq-protocol", "v2")
	topic := &pb.Resource{Name: brokertest.Name("GRPCMetrics")}
	for range 2 {
		if r, err := cl.QueryRoute(ctx, &pb.QueryRouteRequest{Topic: topic}); err != nil || r.Status.GetCode() != pb.Code_OK {
			t.Fatalf("route: %v %v", r, err)
		}
	}
	r, err := cl.SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{{Topic: topic, Body: []byte("x"), SystemProperties: &pb.SystemProperties{}}}})
	if err != nil || r.Status.GetCode() != pb.Code_ILLEGAL_MESSAGE_ID {
		t.Fatalf("send without a message id: %v %v", r, err)
	}

	fams, body := scrape(t, env)
	for _, c := range []struct {
		method, code string
		want         float64
	}{{"QueryRoute", "OK", 2}, {"SendMessage", "ILLEGAL_MESSAGE_ID", 1}} {
		if got, n := value(fams, "rmq_grpc_responses_total", "method", c.method, "code", c.code); n != 1 || got != c.want {
			t.Errorf("rmq_grpc_responses_total{method=%q,code=%q} = %v (%d series), want %v", c.method, c.code, got, n, c.want)
		}
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}
