package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rmq-go/rmq/core/message"
)

// refuseAll is the Replicator of a member that never leads: nothing it
// does in these tests proposes.
type refuseAll struct{}

func (refuseAll) Propose(_ []byte, done func(error)) { done(errors.New("not the leader")) }

// roundEntry builds a committed round entry holding msgs at off, as a
// leader proposes it.
func roundEntry(off int64, msgs ...*message.Message) []byte {
	buf := appendMarker(nil, off, 0)
	for _, m := range msgs {
		m.CommitLogOffset = off + int64(len(buf))
		at := len(buf)
		buf, _ = message.AppendRecord(buf, m)
		buf = binary.BigEndian.AppendUint32(buf, frameCRC(buf[at:]))
	}
	e := []byte{entryRound}
	e = binary.BigEndian.AppendUint64(e, 7)
	e = binary.BigEndian.AppendUint32(e, 1)
	e = binary.BigEndian.AppendUint64(e, uint64(off))
	e = binary.BigEndian.AppendUint32(e, uint32(len(buf)))
	return append(e, buf...)
}

// FuzzApply hands arbitrary entries to a replica's store: none may panic,
// and what a round entry makes readable verifies.
func FuzzApply(f *testing.F) {
	f.Add(roundEntry(0, &message.Message{Topic: "T", Body: []byte("hello"), BornTimestamp: 1}))
	f.Add([]byte{entryMeta, 0, 0, 0, 1, 1, 0, 1, 'a', 0, 0, 0, 1, 'v'})
	f.Add([]byte{entryProgress, 0, 0, 0, 1, 0, 1, 'p', 1, 0, 0, 0, 0, 0, 0, 0, 9})
	f.Add([]byte{entryDelete, 0, 0, 0, 0, 0, 0, 0, 0, 'T'})
	f.Add([]byte{entryKeys, 0, 0, 0, 1, keySet, 0, 0, 0, 2, kindKeys, 'k', 0, 0, 0, 1, 'v'})
	f.Add([]byte{entryKeys, 0, 0, 0, 1, keyDeleteRange, 0, 0, 0, 1, kindKeys, 0, 0, 0, 1, kindKeys + 1})
	const storeInputs = 256
	open := func(tb testing.TB) *Store {
		s, err := Open(Options{Dir: "/d", FS: vfs.NewMem(), SegmentSize: 64 << 10, IndexMemTableSize: 1 << 20,
			Replicator: refuseAll{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			tb.Fatal(err)
		}
		return s
	}
	s, inputs := open(f), 0
	defer func() { s.Close() }()
	f.Fuzz(func(t *testing.T, entry []byte) {
		if inputs++; inputs%storeInputs == 0 {
			s.Close()
			s = open(t)
		}
		before := s.written.Load()
		err := s.Apply(entry)
		if err != nil || len(entry) == 0 || entry[0] != entryRound {
			return
		}
		// Every record the round made readable verifies and lies in it.
		for _, q := range s.Queues() {
			it := s.NewQueueIter(q.Topic, q.QueueID, IterOptions{})
			for ok := it.SeekGE(q.MinOffset); ok; ok = it.Next() {
				if off := it.Record().CommitLogOffset(); off >= s.written.Load() {
					t.Fatalf("record at %d past the log's end %d (was %d)", off, s.written.Load(), before)
				}
			}
			it.Close()
		}
	})
}

// FuzzReadSnapshot reads arbitrary snapshot streams: errors, never a panic
// or an allocation beyond the stated bounds.
func FuzzReadSnapshot(f *testing.F) {
	var good bytes.Buffer
	good.Write([]byte{snapIndex, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 'M', 'a', 'v'})
	good.Write([]byte{snapEnd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(good.Bytes())
	f.Add([]byte{snapIndex, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		readSnapshot(bytes.NewReader(data), func(kind byte, key string, v io.Reader, vlen int64) error {
			if kind == snapIndex && vlen > maxSnapIndexValue {
				t.Fatalf("an index value of %d bytes passed", vlen)
			}
			_, err := io.CopyN(io.Discard, v, vlen)
			return err
		})
	})
}

// FuzzSnapshotStream turns arbitrary manifests into full streams: an
// error, or a stream of exactly the size it states that RestoreDir takes.
func FuzzSnapshotStream(f *testing.F) {
	s, err := Open(Options{Dir: "/d", FS: vfs.NewMem(), SegmentSize: 16 << 10, IndexMemTableSize: 1 << 20,
		Replicator: refuseAll{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	if err := s.Apply(roundEntry(0, &message.Message{Topic: "T", Body: []byte("hello"), BornTimestamp: 1})); err != nil {
		f.Fatal(err)
	}
	snap, err := s.TakeSnapshot()
	if err != nil {
		f.Fatal(err)
	}
	var manifest bytes.Buffer
	snap.WriteTo(&manifest)
	f.Add(manifest.Bytes())
	f.Fuzz(func(t *testing.T, m []byte) {
		size, r, err := s.SnapshotStream(bytes.NewReader(m))
		if err != nil {
			return
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return // the manifest's end lies past the log
		}
		if int64(len(data)) != size {
			t.Fatalf("stream of %d bytes, %d stated", len(data), size)
		}
		if err := RestoreDir(vfs.NewMem(), "/r", bytes.NewReader(data)); err != nil {
			t.Fatalf("restoring the full stream: %v", err)
		}
	})
}
