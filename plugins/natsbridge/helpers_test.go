package natsbridge_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/plugins/natsbridge"
)

// natsServer is an embedded nats-server with JetStream, on a free port
// with its store in a temporary directory. It can be stopped and started
// again on the same port and store.
type natsServer struct {
	t    testing.TB
	opts server.Options
	mu   sync.Mutex
	srv  *server.Server
	URL  string
}

func runNATS(t testing.TB) *natsServer {
	t.Helper()
	s := &natsServer{t: t, opts: server.Options{
		Host:      "127.0.0.1",
		Port:      -1,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *natsServer) start() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		s.t.Fatalf("nats-server: %v", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		s.t.Fatal("nats-server did not start")
	}
	s.srv = srv
	// Keep the port for restarts.
	s.opts.Port = srv.Addr().(*net.TCPAddr).Port
	s.URL = fmt.Sprintf("nats://127.0.0.1:%d", s.opts.Port)
}

func (s *natsServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// client connects a test client; it is closed when the test ends.
func (s *natsServer) client(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(s.URL, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// streamMsgs returns the stream's messages in order.
func streamMsgs(t testing.TB, js jetstream.JetStream, stream string) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatalf("get %d: %v", seq, err)
		}
		out = append(out, m)
	}
	return out
}

func streamCount(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// fakeSource is an in-memory outbox with durable counters that survive a
// bridge restart (as the store's do).
type fakeSource struct {
	mu       sync.Mutex
	events   []outbox.Event // offsets min..max-1
	min      int64
	sig      chan struct{}
	progress map[string]int64
	durable  map[string]int64
	flushes  int
	readErr  error
}

func newFakeSource() *fakeSource {
	return &fakeSource{progress: map[string]int64{}, durable: map[string]int64{}}
}

// add appends events, giving them their offsets and a time, and wakes
// readers.
func (f *fakeSource) add(evs ...outbox.Event) {
	f.mu.Lock()
	for _, e := range evs {
		e.Offset = f.min + int64(len(f.events))
		if e.Time.IsZero() {
			e.Time = time.Now()
		}
		f.events = append(f.events, e)
	}
	ch := f.sig
	f.sig = nil
	f.mu.Unlock()
	if ch != nil {
		close(ch)
	}
}

// trim drops events below off, as retention does.
func (f *fakeSource) trim(off int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(off-f.min, int64(len(f.events)))
	f.events = f.events[n:]
	f.min += n
}

func (f *fakeSource) EventOffsets() (int64, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.min, f.min + int64(len(f.events))
}

func (f *fakeSource) WaitEvents() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sig == nil {
		f.sig = make(chan struct{})
	}
	return f.sig
}

func (f *fakeSource) ReadEvents(from int64, max int, dst []outbox.Event) ([]outbox.Event, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.readErr != nil {
		return dst, f.readErr
	}
	if from < f.min {
		return dst, fmt.Errorf("offset %d is below the min offset %d", from, f.min)
	}
	for i := from - f.min; i < int64(len(f.events)) && max > 0; i, max = i+1, max-1 {
		dst = append(dst, f.events[i])
	}
	return dst, nil
}

func (f *fakeSource) Progress(name string) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.progress[name]
	return v, ok
}

func (f *fakeSource) SetProgress(name string, v int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.progress[name] = v
}

func (f *fakeSource) FlushProgress() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.flushes++
	for k, v := range f.progress {
		f.durable[k] = v
	}
	return nil
}

// crash forgets counters that were never flushed.
func (f *fakeSource) crash() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.progress = map[string]int64{}
	for k, v := range f.durable {
		f.progress[k] = v
	}
}

func (f *fakeSource) durableValue(name string) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.durable[name]
	return v, ok
}

// event builds a test event.
func event(kind, group, topic string, i int) outbox.Event {
	return outbox.Event{
		Kind:              kind,
		Group:             group,
		Topic:             topic,
		MsgID:             fmt.Sprintf("MSG%06d", i),
		OriginMsgID:       fmt.Sprintf("ORIG%06d", i),
		Keys:              fmt.Sprintf("k%d", i),
		Tags:              "TagA",
		QueueID:           int32(i % 4),
		QueueOffset:       int64(i),
		ReconsumeTimes:    int32(i%3 + 1),
		MaxReconsumeTimes: 3,
		DelayLevel:        4,
		NextAttemptAt:     time.UnixMilli(1_800_000_000_000 + int64(i)),
		Reason:            "test",
		Body:              fmt.Appendf(nil, "body-%d", i),
		Properties:        message.Properties(nil).With("color", "blue"),
	}
}

// testOptions returns options for a bridge reading src and publishing to
// s, with a provisioned stream and short timeouts.
func testOptions(s *natsServer, src natsbridge.Source) natsbridge.Options {
	return natsbridge.Options{
		Source:          src,
		URLs:            []string{s.URL},
		Cluster:         "DefaultCluster",
		Broker:          "broker-a",
		Provision:       true,
		DuplicateWindow: 10 * time.Minute,
		StreamMaxAge:    time.Hour,
		ReconnectWait:   50 * time.Millisecond,
		BackoffMin:      20 * time.Millisecond,
		BackoffMax:      200 * time.Millisecond,
		PublishTimeout:  2 * time.Second,
		CursorInterval:  20 * time.Millisecond,
		Logger:          brokertest.Logger(),
	}
}

func startBridge(t testing.TB, opts natsbridge.Options) *natsbridge.Bridge {
	t.Helper()
	b, err := natsbridge.New(opts)
	if err != nil {
		t.Fatalf("new bridge: %v", err)
	}
	if err := b.Start(); err != nil {
		t.Fatalf("start bridge: %v", err)
	}
	t.Cleanup(func() { stopBridge(t, b) })
	return b
}

func stopBridge(t testing.TB, b *natsbridge.Bridge) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Errorf("bridge shutdown: %v", err)
	}
}

// waitCursor waits until the bridge's cursor reaches off.
func waitCursor(t testing.TB, b *natsbridge.Bridge, off int64, timeout time.Duration) {
	t.Helper()
	brokertest.Eventually(t, timeout, fmt.Sprintf("the cursor to reach %d", off), func() bool {
		return b.Status().Cursor >= off
	})
}
