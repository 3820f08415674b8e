package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/rmq-go/rmq/client"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// chromium returns the path of a Chromium to drive, skipping the test
// when there is none unless RMQ_REQUIRE_CHROMIUM is set (CI sets it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("RMQ_REQUIRE_CHROMIUM") != "" {
		t.Fatal("no chromium on PATH and RMQ_REQUIRE_CHROMIUM is set (apt-get install chromium)")
	}
	t.Skip("no chromium on PATH: install it (apt-get install chromium) to run the web console's browser test")
	return ""
}

// browser starts a headless Chromium and returns a tab's context and the
// console messages it logged so far.
func browser(t *testing.T) (context.Context, func() []string) {
	path := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless,
		chromedp.DisableGPU, chromedp.WindowSize(1200, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser and opens the tab
		t.Fatalf("start chromium: %v", err)
	}
	var mu sync.Mutex
	var msgs []string
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() || m.Type == chromedp.ConsoleWarning {
				mu.Lock()
				msgs = append(msgs, m.String()+" "+m.URL)
				mu.Unlock()
			}
		}
	}()
	return ctx, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), msgs...)
	}
}

// undecided leaves every transaction unknown.
type undecided struct{}

func (undecided) ExecuteLocal(context.Context, *client.Message) client.LocalTransactionState {
	return client.TransactionUnknown
}
func (undecided) CheckLocal(*client.MessageExt) client.LocalTransactionState {
	return client.TransactionUnknown
}

// TestConsoleInBrowser drives the web console in headless Chromium over a
// broker with real traffic: every page renders what the broker holds,
// without a template or script error, and the resend button moves a dead
// letter back into its topic. Screenshots go to a temporary directory, or
// to RMQ_CONSOLE_SHOTS when set.
func TestConsoleInBrowser(t *testing.T) {
	chromium(t) // skip before starting anything
	env := brokertest.Start(t)
	const topic, group = "Orders", "billing"
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	// No retries: a failed message goes straight to the dead letters.
	if err := env.Broker.PutGroupConfig(broker.SubscriptionGroupConfig{GroupName: group, ConsumeEnable: true, RetryQueueNums: 1, RetryMaxTimes: 0}); err != nil {
		t.Fatal(err)
	}
	co := client.ClientOptions{NameServers: []string{env.NamesrvAddr}, InstanceName: brokertest.Name("console"), Logger: brokertest.Logger()}
	p, err := client.NewProducer(client.ProducerOptions{Client: co, Group: "console-producers"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	ctx := context.Background()
	var firstID, thirdID string
	for i := range 6 {
		body := fmt.Sprintf(`{"order":%d,"note":"<script>alert(%d)</script>"}`, i, i)
		res, err := p.SendSync(ctx, client.NewMessage(topic, []byte(body)).WithTag("created").WithKeys(fmt.Sprintf("order-%d", i)))
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		switch i {
		case 0:
			firstID = res.OffsetMsgID
		case 2:
			thirdID = res.MsgID
		}
	}
	if _, err := p.SendSync(ctx, client.NewMessage(topic, []byte("later")).WithDelayLevel(18)); err != nil {
		t.Fatalf("send delayed: %v", err)
	}
	due := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	if _, err := p.SendSync(ctx, client.NewMessage(topic, []byte("at a time")).SetProperty(message.PropertyTimerDeliverMS, due)); err != nil {
		t.Fatalf("send timed: %v", err)
	}
	// A transaction left unknown stays pending.
	tp, err := client.NewTransactionProducer(client.ProducerOptions{Client: co, Group: "console-txn"}, undecided{})
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	if _, err := tp.SendTransactional(ctx, client.NewMessage(topic, []byte("undecided"))); err != nil {
		t.Fatalf("send transactional: %v", err)
	}

	// The consumer fails every message the first time; a resent one (it
	// carries ORIGIN_MESSAGE_ID) is consumed.
	consumed := make(chan string, 64)
	c, err := client.NewPushConsumer(client.ConsumerOptions{Client: co, Group: group, ConsumeFrom: client.ConsumeFromFirstOffset,
		PersistInterval: 100 * time.Millisecond},
		client.ConcurrentFunc(func(_ context.Context, _ *client.ConcurrentContext, msgs []*client.MessageExt) client.ConsumeResult {
			for _, m := range msgs {
				if m.Property(message.PropertyOriginMessageID) == "" {
					return client.ConsumeRetryLater
				}
			}
			for _, m := range msgs {
				consumed <- string(m.Body)
			}
			return client.ConsumeSuccess
		}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, client.Selector{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown(context.Background()) })
	// Dead letters are stored by the broker on the consumer's send-back,
	// and offsets committed every PersistInterval; nothing signals either,
	// so poll the broker's own tables.
	deadline := time.Now().Add(30 * time.Second)
	var firstDead outbox.DeadLetter // the first row of the dead-letter page
	for {
		dl, err := env.Broker.Outbox().ListDLQ(outbox.DLQSelector{Group: group})
		committed, retry := 0, false
		for _, e := range env.Store.ConsumerOffsets(group) {
			if e.Topic == topic && e.Offset == 3 {
				committed++
			}
			retry = retry || e.Topic == broker.RetryGroupTopicPrefix+group
		}
		// The client commits every queue it holds, its retry queue too.
		if err == nil && len(dl) == 6 && committed == 2 && retry {
			firstDead = dl[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dead letters: %d (%v), want 6; offsets committed %v", len(dl), err, env.Store.ConsumerOffsets(group))
		}
		time.Sleep(50 * time.Millisecond)
	}

	srv := httptest.NewUnstartedServer(nil)
	srv.Config.Handler = env.ConsoleHandler(srv.Listener.Addr().String())
	srv.Start()
	t.Cleanup(srv.Close)

	shots := os.Getenv("RMQ_CONSOLE_SHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("console screenshots in %s", shots)

	bctx, consoleErrors := browser(t)
	visit := func(name, path string, want ...string) string {
		t.Helper()
		tctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(tctx, chromedp.Navigate(srv.URL+"/"+path), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		text, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("body")))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: no %q in the page:\n%s", path, w, text)
			}
		}
		for _, bad := range []string{"template:", "ZgotmplZ", "could not be rendered"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s: the page shows %q:\n%s", path, bad, text)
			}
		}
		png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("%s: screenshot: %v", path, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
		return text
	}

	visit("overview", "", "broker-a", "Connections", "messages since start")
	visit("topics", "topics", topic, "%DLQ%"+group)
	visit("topics-dlq", "topics?kind=dlq", "%DLQ%"+group)
	visit("topic", "topic?name="+topic, "Queues", group, "Lag")
	visit("groups", "groups", group, "CLUSTERING")
	groupText := visit("group", "group?name="+group, "Members", co.InstanceName, "Lag per queue", topic, "3 rows")
	if !strings.Contains(groupText, topic+"\t0\t3\t3\t0") || !strings.Contains(groupText, topic+"\t1\t3\t3\t0") {
		t.Errorf("group page: no lag row for %s at offset 3:\n%s", topic, groupText)
	}
	msgText := visit("message-by-key", "message?key=order-3&topic="+topic, "order-3", `"order":3`, "<script>alert(3)</script>", "created")
	if !strings.Contains(msgText, "Properties") {
		t.Errorf("message page without properties")
	}
	visit("message-by-id", "message?id="+firstID, `"order":0`)
	visit("message-by-msgid", "message?topic="+topic+"&id="+thirdID, `"order":2`, thirdID)
	visit("message-by-offset", "message?topic="+topic+"&queue=0&offset=0", topic+", queue 0, offset 0")
	visit("dlq-groups", "dlq", group)
	visit("dlq", "dlq?group="+group, "order-0", "order-5", topic)
	visit("scheduled", "scheduled", "Delayed messages", "2h0m0s", "1 waiting")
	visit("transactions", "transactions", "1 unresolved", "console-txn")
	visit("plugins", "plugins", "no plugins")
	visit("bridge", "bridge", "The NATS bridge is off")
	visit("bad-input", "topic?name=%3Cb%3E", "want a topic or group name")

	// Resend the first dead letter with its button.
	before := env.Store.MaxOffset(topic, 0) + env.Store.MaxOffset(topic, 1)
	wantOrder := `"order":` + strings.TrimPrefix(firstDead.Keys, "order-")
	tctx, cancel := context.WithTimeout(bctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.Navigate(srv.URL+"/dlq?group="+group), chromedp.WaitVisible(chromedp.CSS("button.resend")),
		chromedp.Click(chromedp.CSS("button.resend")), chromedp.WaitVisible(chromedp.CSS("#page-result, #page-error"))); err != nil {
		t.Fatalf("resend: %v", err)
	}
	result, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("main")))
	if err != nil || !strings.Contains(result, "Dead letter resent") || !strings.Contains(result, topic) {
		t.Fatalf("resend result %q, %v", result, err)
	}
	if png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(shots, "resent.png"), png, 0o644)
	}
	if after := env.Store.MaxOffset(topic, 0) + env.Store.MaxOffset(topic, 1); after != before+1 {
		t.Fatalf("%s holds %d messages after the resend, want %d", topic, after, before+1)
	}
	select {
	case body := <-consumed:
		if !strings.Contains(body, wantOrder) {
			t.Errorf("consumed %q after the resend, want %s", body, wantOrder)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the resent message was not consumed from its topic")
	}
	for q := range int32(2) {
		if off := env.Store.MaxOffset(topic, q) - 1; off >= 3 { // each queue held 3 before
			visit("message-resent", fmt.Sprintf("message?topic=%s&queue=%d&offset=%d", topic, q, off), "ORIGIN_MESSAGE_ID", wantOrder)
		}
	}

	// The reload button answers with what the reload did.
	if err := chromedp.Do(tctx, chromedp.Navigate(srv.URL+"/plugins"), chromedp.Click(chromedp.CSS("#reload")), chromedp.WaitVisible(chromedp.CSS("#page-result, #page-error"))); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if result, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS("main"))); err != nil || !strings.Contains(result, "Plugins reloaded") {
		t.Fatalf("reload result %q, %v", result, err)
	}

	// The picture in docs/operations.md: the dead-letter page, viewport only.
	if out := os.Getenv("RMQ_CONSOLE_README_SHOT"); out != "" {
		if err := chromedp.Do(tctx, chromedp.EmulateViewport(1100, 520), chromedp.Navigate(srv.URL+"/dlq?group="+group), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(tctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("console screenshot written to %s", out)
	}

	var errs []string
	for _, e := range consoleErrors() {
		if !strings.Contains(e, "status of 400") || !strings.Contains(e, "topic?name=%3Cb%3E") { // the bad input visited on purpose
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		t.Errorf("the browser logged errors:\n%s", strings.Join(errs, "\n"))
	}
}
