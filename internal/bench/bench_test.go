package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
)

// virtualClock is a clock whose sleeps return at once, moving its time
// forward to the wake-up time. Under it a paced run sends exactly what its
// schedule allows, however slowly the machine runs.
type virtualClock struct{ t atomic.Int64 }

func (c *virtualClock) now() time.Duration { return time.Duration(c.t.Load()) }

func (c *virtualClock) sleepUntil(ctx context.Context, t time.Duration) error {
	for {
		cur := c.t.Load()
		if int64(t) <= cur || c.t.CompareAndSwap(cur, int64(t)) {
			return ctx.Err()
		}
	}
}

// syncBuffer is an io.Writer safe for the progress goroutine and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// testOptions are small settings for runs against the fake broker.
func testOptions(addr string) Options {
	return Options{Broker: addr, Conns: 8, InFlight: 2, Size: 100, Timeout: 10 * time.Second}
}

func TestProduceCount(t *testing.T) {
	fb := startFake(t, true)
	opts := testOptions(fb.addr)
	opts.Count = 1000
	var out syncBuffer
	sum, err := Produce(context.Background(), opts, &out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Messages != 1000 || sum.Requests != 1000 || sum.Errors != 0 || sum.Bytes != 1000*100 {
		t.Fatalf("summary %+v, want 1000 messages and requests, 100000 bytes, no errors", sum)
	}
	if got := fb.count(remoting.SendMessage); got != 1000 {
		t.Errorf("broker got %d SEND_MESSAGE, want 1000", got)
	}
	if got := fb.count(remoting.UpdateAndCreateTopic); got != 1 {
		t.Errorf("broker got %d UPDATE_AND_CREATE_TOPIC, want 1", got)
	}
	// Round robin over the default 8 queues.
	for q := range int32(DefaultQueues) {
		if n := fb.stored(q); n != 125 {
			t.Errorf("queue %d holds %d messages, want 125", q, n)
		}
	}
	if sum.P50 <= 0 || sum.P50 > sum.P99 || sum.P99 > sum.Max {
		t.Errorf("latencies out of order: %+v", sum)
	}
	want := "produce to " + fb.addr + " topic BenchTopic (8 queues): 8 conns × 2 in flight, 100-byte messages, batch 1, rate unlimited, for 1000 messages\n"
	if out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	for _, want := range []string{"messages  1000 in", "requests  1000, 0 errors", "p99.9"} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
}

func TestProduceBatch(t *testing.T) {
	for _, tc := range []struct {
		count       int64
		requests    int64
		lastRequest int
	}{
		{count: 32 * 320, requests: 320},
		{count: 1000, requests: 32}, // 31 of 32 and one of 8
	} {
		t.Run(fmt.Sprint("count=", tc.count), func(t *testing.T) {
			fb := startFake(t, true)
			opts := testOptions(fb.addr)
			opts.Count, opts.Batch = tc.count, 32
			sum, err := Produce(context.Background(), opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			if sum.Messages != tc.count || sum.Requests != tc.requests || sum.Errors != 0 {
				t.Fatalf("summary %+v, want %d messages in %d requests", sum, tc.count, tc.requests)
			}
			if got := fb.count(remoting.SendBatchMessage); got != tc.requests {
				t.Errorf("broker got %d SEND_BATCH_MESSAGE, want %d", got, tc.requests)
			}
			if got := fb.count(remoting.SendMessage); got != 0 {
				t.Errorf("broker got %d SEND_MESSAGE, want none", got)
			}
			var stored int64
			for q := range int32(DefaultQueues) {
				stored += int64(fb.stored(q))
			}
			if stored != tc.count {
				t.Errorf("broker stored %d messages, want %d", stored, tc.count)
			}
		})
	}
}

func TestProduceErrorCodes(t *testing.T) {
	fb := startFake(t, true)
	fb.sendCode.Store(remoting.SystemError)
	opts := testOptions(fb.addr)
	opts.Count = 100
	sum, err := Produce(context.Background(), opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Messages != 0 || sum.Bytes != 0 || sum.Errors != 100 || sum.Requests != 100 {
		t.Fatalf("summary %+v, want 100 failed requests and no messages", sum)
	}
	if len(sum.ErrorSamples) != 1 || sum.ErrorSamples[0] != "SYSTEM_ERROR: fake failure" {
		t.Errorf("ErrorSamples %q, want the one remark", sum.ErrorSamples)
	}
	if !strings.Contains(sum.String(), "error     SYSTEM_ERROR: fake failure") {
		t.Errorf("summary lacks the error:\n%s", sum)
	}
}

// TestProduceProgress holds the first send until a progress line is out,
// so the line is checked without depending on how fast the run goes.
func TestProduceProgress(t *testing.T) {
	fb := startFake(t, true)
	var out syncBuffer
	var once sync.Once
	fb.setOnSend(func() {
		once.Do(func() {
			for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
				if strings.Contains(out.String(), " msgs/s ") {
					return
				}
			}
			t.Error("no progress line within 10 s")
		})
	})
	opts := testOptions(fb.addr)
	opts.Count, opts.Progress = 100, 5*time.Millisecond
	if _, err := Produce(context.Background(), opts, &out); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[0], "produce to ") {
		t.Fatalf("output:\n%s", out.String())
	}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) != 9 || f[2] != "msgs/s" || f[4] != "MB/s" || f[6] != "errors" || f[7] != "p99" {
			t.Errorf("progress line %q", l)
		}
	}
}

func TestProduceTimeout(t *testing.T) {
	fb := startFake(t, true)
	fb.holdSends.Store(true)
	opts := testOptions(fb.addr)
	opts.Count, opts.Conns, opts.InFlight, opts.Timeout = 4, 2, 1, 50*time.Millisecond
	sum, err := Produce(context.Background(), opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Errors != 4 || sum.Requests != 4 || sum.Messages != 0 {
		t.Fatalf("summary %+v, want 4 requests timed out", sum)
	}
	if len(sum.ErrorSamples) != 1 || !strings.Contains(sum.ErrorSamples[0], ErrTimeout.Error()) {
		t.Errorf("ErrorSamples %q, want a timeout", sum.ErrorSamples)
	}
}

// TestProduceRate runs paced under a virtual clock, where each request
// leaves at the time its pacer slot says, and counts what the broker got:
// Rate×Duration messages, neither more nor fewer.
func TestProduceRate(t *testing.T) {
	for _, batch := range []int{1, 10} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			fb := startFake(t, true)
			opts := testOptions(fb.addr)
			opts.Rate, opts.Duration, opts.Batch = 1000, 2*time.Second, batch
			clk := new(virtualClock)
			sum, err := produce(context.Background(), opts, nil, clk)
			if err != nil {
				t.Fatal(err)
			}
			wantReqs := int64(2000 / batch)
			if sum.Messages != 2000 || sum.Requests != wantReqs || sum.Errors != 0 {
				t.Errorf("summary %+v, want 2000 messages in %d requests", sum, wantReqs)
			}
			code := int16(remoting.SendMessage)
			if batch > 1 {
				code = remoting.SendBatchMessage
			}
			if got := fb.count(code); got != wantReqs {
				t.Errorf("broker got %d requests, want %d", got, wantReqs)
			}
			// The last slot starts before the deadline.
			if now := clk.now(); now >= 2*time.Second || now < 2*time.Second-time.Duration(batch)*time.Millisecond {
				t.Errorf("virtual clock at %v after the run", now)
			}
		})
	}
}

func TestProduceContextCancel(t *testing.T) {
	fb := startFake(t, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var sends atomic.Int64
	fb.setOnSend(func() {
		if sends.Add(1) == 200 {
			cancel()
		}
	})
	opts := testOptions(fb.addr)
	opts.Duration = time.Hour
	sum, err := Produce(ctx, opts, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Produce returned %v, want context.Canceled", err)
	}
	if sum.Messages < 100 || sum.Errors != 0 {
		t.Errorf("summary %+v, want the messages sent before the cancel and no errors", sum)
	}
}

func TestProduceUnreachable(t *testing.T) {
	fb := startFake(t, true)
	opts := testOptions(fb.addr)
	opts.Broker = "127.0.0.1:1" // nothing listens on port 1
	opts.Count = 10
	if _, err := Produce(context.Background(), opts, nil); err == nil || !strings.Contains(err.Error(), "UPDATE_AND_CREATE_TOPIC") {
		t.Fatalf("Produce returned %v, want a failure to create the topic", err)
	}
}

func TestConsume(t *testing.T) {
	fb := startFake(t, true)
	// Queue 1 lost its first 7 messages to retention; queue 3 is empty.
	n := []int{40, 57, 3, 0}
	skip := []int{0, 7, 0, 0}
	fb.seed("CatchUp", 4, n, skip, 64)
	fb.pullCap.Store(5) // pulls return fewer than asked, so offsets chain
	opts := testOptions(fb.addr)
	opts.Topic, opts.Queues = "CatchUp", 4
	sum, err := Consume(context.Background(), opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	const want = 40 + 50 + 3
	if sum.Messages != want || sum.Bytes != want*64 || sum.Errors != 0 {
		t.Fatalf("summary %+v, want %d messages of 64 bytes, no errors", sum, want)
	}
	if wantPulls := int64(8 + 10 + 1); sum.Requests != wantPulls || fb.count(remoting.PullMessage) != wantPulls {
		t.Errorf("%d requests, broker got %d pulls, want %d", sum.Requests, fb.count(remoting.PullMessage), wantPulls)
	}
}

func TestProduceThenConsume(t *testing.T) {
	fb := startFake(t, true)
	opts := testOptions(fb.addr)
	opts.Count, opts.Batch = 1000, 7
	if _, err := Produce(context.Background(), opts, nil); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	sum, err := Consume(context.Background(), opts, &out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Messages != 1000 || sum.Bytes != 1000*100 || sum.Errors != 0 {
		t.Fatalf("summary %+v, want the 1000 messages produced", sum)
	}
	if !strings.Contains(out.String(), "(8 queues holding 1000 messages)") {
		t.Errorf("header does not count the messages:\n%s", out.String())
	}
}

func TestConsumeCount(t *testing.T) {
	fb := startFake(t, true)
	fb.seed("Counted", 3, []int{30, 30, 30}, []int{0, 0, 0}, 10)
	opts := testOptions(fb.addr)
	opts.Topic, opts.Queues, opts.Count, opts.PullBatch = "Counted", 3, 50, 8
	sum, err := Consume(context.Background(), opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Messages != 50 || sum.Errors != 0 {
		t.Fatalf("summary %+v, want exactly 50 messages", sum)
	}
}

// TestConsumeShortQueue has the broker claim more messages than it holds:
// the pull past the last one answers PULL_NOT_FOUND, which ends the queue
// without an error.
func TestConsumeShortQueue(t *testing.T) {
	fb := startFake(t, true)
	fb.seed("Short", 2, []int{10, 20}, []int{0, 0}, 10)
	fb.maxExtra.Store(5)
	opts := testOptions(fb.addr)
	opts.Topic, opts.Queues = "Short", 2
	sum, err := Consume(context.Background(), opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Messages != 30 || sum.Errors != 0 {
		t.Fatalf("summary %+v, want 30 messages, no errors", sum)
	}
}

func TestConsumeMissingTopic(t *testing.T) {
	fb := startFake(t, true)
	opts := testOptions(fb.addr)
	_, err := Consume(context.Background(), opts, nil)
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Consume returned %v, want ErrRefused", err)
	}
}

func TestOptionsInvalid(t *testing.T) {
	_, err := Produce(context.Background(), Options{Topic: "bad topic", Conns: -1, Size: 5 << 20, Rate: -3, Progress: -1}, nil)
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("Produce returned %v, want ErrInvalidOptions", err)
	}
	for _, want := range []string{"Topic", "Conns", "Size", "Rate", "Progress"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	_, err = Produce(context.Background(), Options{Size: 64 << 10, Batch: 100}, nil)
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "batch") {
		t.Errorf("oversized batch: %v", err)
	}
}

func TestOptionsDefaults(t *testing.T) {
	p := Options{}.withDefaults(false)
	if p.Broker != DefaultBroker || p.Topic != DefaultTopic || p.Conns != 64 || p.InFlight != 1 || p.Size != 1024 ||
		p.Batch != 1 || p.Duration != 10*time.Second || p.Progress != 0 || p.Queues != 8 || p.PullBatch != 32 {
		t.Errorf("produce defaults: %+v", p)
	}
	if d := (Options{Count: 5}).withDefaults(false).Duration; d != 0 {
		t.Errorf("Duration with Count = %v, want no limit", d)
	}
	if d := (Options{}).withDefaults(true).Duration; d != 0 {
		t.Errorf("consume Duration = %v, want no limit", d)
	}
}

func TestPacer(t *testing.T) {
	clk := new(virtualClock)
	p := newPacer(clk, 4000, 0) // 250 µs per message
	for i := range 8 {
		if at := p.reserve(2); at != time.Duration(i)*500*time.Microsecond {
			t.Fatalf("reservation %d at %v", i, at)
		}
	}
	// After a long stall the schedule catches up by pacerBurst at most.
	clk.t.Store(int64(time.Second))
	at := p.reserve(1)
	if at != time.Second-pacerBurst {
		t.Errorf("after a stall: reservation at %v, want %v", at, time.Second-pacerBurst)
	}
	if next := p.reserve(1); next != at+250*time.Microsecond {
		t.Errorf("next reservation at %v", next)
	}
}

func TestProgressLine(t *testing.T) {
	got := progressLine(3*time.Second, time.Second, 52113, 52113*1024, 2, 1234567*time.Nanosecond)
	want := "      3s      52113 msgs/s     53.36 MB/s        2 errors   p99 1.23ms"
	if got != want {
		t.Errorf("progressLine:\n got %q\nwant %q", got, want)
	}
}

func TestSummaryString(t *testing.T) {
	s := Summary{Messages: 1000, Bytes: 1e6, Requests: 1000, Errors: 1, Elapsed: 2 * time.Second, MsgsPerSec: 500, MBPerSec: 0.5,
		P50: time.Millisecond, P90: 2 * time.Millisecond, P99: 3 * time.Millisecond, P999: 4 * time.Millisecond, Max: 5 * time.Millisecond,
		ErrorSamples: []string{"SYSTEM_BUSY: later"}}
	want := "messages  1000 in 2s: 500 msgs/s, 0.50 MB/s\n" +
		"requests  1000, 1 errors\n" +
		"latency   p50 1ms  p90 2ms  p99 3ms  p99.9 4ms  max 5ms\n" +
		"error     SYSTEM_BUSY: later\n"
	if got := s.String(); got != want {
		t.Errorf("String:\n%s\nwant:\n%s", got, want)
	}
}
