package grpcserver_test

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/brokertest"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
	"github.com/rmq-go/rmq/internal/server"
)

// TestSendAckedAfterFsync: under the sync flush mode a gRPC send is
// answered only once its messages are fsync'd. Senders of one to three
// messages a request run until 300 are acknowledged; the machine then
// loses everything not synced, and every message acknowledged before is
// in the store opened on what is left.
func TestSendAckedAfterFsync(t *testing.T) {
	testSendAckedAfterFsync(t, store.FlushSync)
}

func testSendAckedAfterFsync(t *testing.T, flush store.FlushMode) {
	fs := vfs.NewCrashableMem()
	e := start(t, func(c *server.Config) {
		c.Store.FS, c.Store.Flush, c.Store.SegmentSize = fs, flush, 4<<20
	})
	topic := brokertest.Name("Durable")
	e.createTopic(t, topic, 4)
	c := ctx(t)

	const target = 300
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	enough := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				var ms []*pb.Message
				for j := range 1 + i%3 {
					id := "w" + strconv.Itoa(w) + "-" + strconv.Itoa(i) + "-" + strconv.Itoa(j)
					ms = append(ms, msg(topic, id, "t", id))
				}
				r, err := e.cl.SendMessage(c, &pb.SendMessageRequest{Messages: ms})
				if err != nil {
					return
				}
				mu.Lock()
				for k, entry := range r.GetEntries() {
					if entry.GetStatus().GetCode() == pb.Code_OK {
						acked[string(ms[k].Body)] = true
					}
				}
				if len(acked) >= target && w == 0 {
					select {
					case <-enough:
					default:
						close(enough)
					}
				}
				mu.Unlock()
			}
		}()
	}
	<-enough
	mu.Lock()
	before := make([]string, 0, len(acked))
	for b := range acked {
		before = append(before, b)
	}
	// The crash: every byte not fsync'd is lost.
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	mu.Unlock()
	stop.Store(true)
	wg.Wait()

	brokertest.CheckAcknowledgedSurvive(t, crashed, e.Config.DataDir, topic, 4, before)
}

// TestSendRequestSharesRounds: the messages of one SendMessage request
// share the store's group commit: 32 of them take a round or two, not 32
// rounds of their own.
func TestSendRequestSharesRounds(t *testing.T) {
	e := start(t)
	topic := brokertest.Name("Rounds")
	e.createTopic(t, topic, 4)
	e.send(t, msg(topic, "warm", "t", "warm")) // the store's first round
	var ms []*pb.Message
	for i := range 32 {
		ms = append(ms, msg(topic, "r"+strconv.Itoa(i), "t", "x"))
	}
	rounds := e.Store.Stats().Rounds.Load()
	r, err := e.cl.SendMessage(ctx(t), &pb.SendMessageRequest{Messages: ms})
	if err != nil || r.GetStatus().GetCode() != pb.Code_OK || len(r.GetEntries()) != 32 {
		t.Fatalf("send: %v %v", r, err)
	}
	n := e.Store.Stats().Rounds.Load() - rounds
	if n > 3 {
		t.Fatalf("32 messages of one request took %d rounds", n)
	}
	t.Logf("32 messages of one request took %d round(s)", n)
	if n := e.Store.MaxOffset(topic, 0) + e.Store.MaxOffset(topic, 1) + e.Store.MaxOffset(topic, 2) + e.Store.MaxOffset(topic, 3); n != 33 {
		t.Fatalf("%d messages stored, want 33", n)
	}
}
