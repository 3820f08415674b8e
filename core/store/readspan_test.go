package store_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// readCountingFS counts the reads of commit-log segments.
type readCountingFS struct {
	vfs.FS
	reads *atomic.Int64
}

func (fs readCountingFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	return fs.wrap(name, f), err
}

func (fs readCountingFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	return fs.wrap(name, f), err
}

func (fs readCountingFS) wrap(name string, f vfs.File) vfs.File {
	if f == nil || !strings.Contains(name, "commitlog") {
		return f
	}
	return readCountingFile{f, fs.reads}
}

type readCountingFile struct {
	vfs.File
	reads *atomic.Int64
}

func (f readCountingFile) ReadAt(p []byte, off int64) (int, error) {
	f.reads.Add(1)
	return f.File.ReadAt(p, off)
}

// TestQueueReadSpansInterleavedRecords checks that a queue whose records
// the other queues' records interleave is read in one system call per
// batch, not one per record, that each record read is its own, and that a
// damaged record of another queue in between goes unnoticed by this one.
func TestQueueReadSpansInterleavedRecords(t *testing.T) {
	var reads atomic.Int64
	dir := t.TempDir()
	o := store.Options{Dir: dir, FS: readCountingFS{vfs.Default, &reads}, Logger: quietLogger()}
	s := storetest.Open(t, o)
	defer s.Close()
	const queues, per = 8, 32
	body := strings.Repeat("b", 1024)
	msgs := make([]*message.Message, 0, queues*per)
	for i := range per {
		for q := range queues {
			msgs = append(msgs, storetest.Msg("T", int32(q), fmt.Sprintf("%d-%03d-%s", q, i, body)))
		}
	}
	if err := s.Append(msgs); err != nil {
		t.Fatal(err)
	}
	// Damage queue 1's record 5, which lies between queue 0's records.
	storetest.CorruptRecord(t, o, s, "T", 1, 5)

	read := func(q int32) []string {
		reads.Store(0)
		var got []string
		it := s.NewQueueIter("T", q, store.IterOptions{MaxUnits: per, StopOnCorruption: true})
		defer it.Close()
		for ok := it.SeekGE(0); ok; ok = it.Next() {
			got = append(got, string(it.Record().Body()))
		}
		if err := it.Error(); err != nil {
			t.Fatalf("queue %d: %v", q, err)
		}
		return got
	}
	got := read(0)
	if n := reads.Load(); n != 1 {
		t.Errorf("%d reads of the log for queue 0's %d records, want 1", n, per)
	}
	if len(got) != per {
		t.Fatalf("queue 0: %d records, want %d", len(got), per)
	}
	for i, b := range got {
		if want := fmt.Sprintf("0-%03d-%s", i, body); b != want {
			t.Fatalf("queue 0 record %d: %.12q, want %.12q", i, b, want)
		}
	}
	// The damaged record is still caught when its own queue is read.
	it := s.NewQueueIter("T", 1, store.IterOptions{MaxUnits: per, StopOnCorruption: true})
	defer it.Close()
	if it.SeekGE(5) || !errors.Is(it.Error(), store.ErrCorruption) {
		t.Fatalf("queue 1's damaged record: valid %v, error %v; want ErrCorruption", it.Valid(), it.Error())
	}
}
