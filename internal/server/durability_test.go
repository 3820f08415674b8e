package server_test

import (
	"bytes"
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// holdFS holds the first fsync of a file after a write that carries
// marker, until release is closed; entered is closed when that fsync
// begins. Everything else passes through.
type holdFS struct {
	vfs.FS
	marker  []byte
	entered chan struct{}
	release chan struct{}
	armed   atomic.Bool // a write with marker has happened, its fsync not yet
	once    sync.Once
}

func (h *holdFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &holdFile{File: f, h: h}, nil
}

func (h *holdFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	return h.wrap(h.FS.Create(name, cat))
}

func (h *holdFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	return h.wrap(h.FS.Open(name, opts...))
}

func (h *holdFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return h.wrap(h.FS.OpenReadWrite(name, cat, opts...))
}

func (h *holdFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	return h.wrap(h.FS.ReuseForWrite(oldname, newname, cat))
}

type holdFile struct {
	vfs.File
	h *holdFS
}

func (f *holdFile) see(p []byte) {
	if bytes.Contains(p, f.h.marker) {
		f.h.armed.Store(true)
	}
}

func (f *holdFile) Write(p []byte) (int, error) { f.see(p); return f.File.Write(p) }

func (f *holdFile) WriteAt(p []byte, off int64) (int, error) { f.see(p); return f.File.WriteAt(p, off) }

func (f *holdFile) hold() {
	if f.h.armed.CompareAndSwap(true, false) {
		f.h.once.Do(func() { close(f.h.entered) })
		<-f.h.release
	}
}

func (f *holdFile) Sync() error     { f.hold(); return f.File.Sync() }
func (f *holdFile) SyncData() error { f.hold(); return f.File.SyncData() }

// TestRemotingSendWaitsForFsync: under the sync flush mode a send over
// the remoting port is not answered while the fsync covering its message
// is held up, and is answered once it completes.
func TestRemotingSendWaitsForFsync(t *testing.T) {
	marker := []byte("held-up-by-its-fsync")
	h := &holdFS{FS: vfs.NewMem(), marker: marker, entered: make(chan struct{}), release: make(chan struct{})}
	e := brokertest.Start(t, func(c *server.Config) { c.Store.FS, c.Store.Flush = h, store.FlushSync })
	topic := brokertest.Name("Held")
	if err := e.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	p := e.Producer(t)
	// A first send learns the route and warms the connection, so the held
	// send's answer could only wait for the fsync.
	if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("warm"))); err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		_, err := p.SendSync(context.Background(), primitive.NewMessage(topic, marker))
		answered <- err
	}()
	brokertest.Wait(t, h.entered, 10*time.Second, "the fsync covering the message")
	// The message is written and its fsync has begun but cannot finish.
	// An answer that left before the fsync would leave within
	// microseconds of the write: give it ample time to show.
	select {
	case err := <-answered:
		close(h.release)
		t.Fatalf("the send was answered (err %v) while its fsync was held", err)
	case <-time.After(300 * time.Millisecond):
	}
	close(h.release)
	if err := brokertest.Wait(t, answered, 10*time.Second, "the answer after the fsync"); err != nil {
		t.Fatalf("send: %v", err)
	}
}

// TestRemotingSendAckedAfterFsync: under the sync flush mode every send
// the official client saw acknowledged survives a crash that loses
// everything not fsync'd. Eight senders run until 300 are acknowledged;
// the crash is taken while no acknowledgement can be counted.
func TestRemotingSendAckedAfterFsync(t *testing.T) {
	fs := vfs.NewCrashableMem()
	e := brokertest.Start(t, func(c *server.Config) {
		c.Store.FS, c.Store.Flush, c.Store.SegmentSize = fs, store.FlushSync, 4<<20
	})
	topic := brokertest.Name("Durable")
	if err := e.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	p := e.Producer(t)

	const target = 300
	var (
		mu     sync.Mutex
		acked  []string
		stop   atomic.Bool
		wg     sync.WaitGroup
		enough = make(chan struct{})
		once   sync.Once
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				body := "w" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
				r, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body)))
				if err != nil || r.Status != primitive.SendOK {
					continue
				}
				mu.Lock()
				acked = append(acked, body)
				if len(acked) >= target {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		}()
	}
	brokertest.Wait(t, enough, 60*time.Second, "300 acknowledged sends")
	mu.Lock()
	before := append([]string(nil), acked...)
	// The crash: every byte not fsync'd is lost.
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	mu.Unlock()
	stop.Store(true)
	wg.Wait()

	brokertest.CheckAcknowledgedSurvive(t, crashed, e.Config.DataDir, topic, 4, before)
}
