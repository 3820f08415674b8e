package cluster

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// encodePebbleEntry is an entry in the layout of the pebble log before
// raft-wal.
func encodePebbleEntry(l *raft.Log) []byte {
	v := binary.BigEndian.AppendUint64(nil, l.Term)
	v = append(v, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	v = binary.BigEndian.AppendUint64(v, uint64(at))
	v = binary.BigEndian.AppendUint32(v, uint32(len(l.Data)))
	v = append(v, l.Data...)
	return append(v, l.Extensions...)
}

// writePebbleLog writes entries first..last and raft's stable values in
// the pebble layout under dir/log, as a member of an earlier version
// leaves it.
func writePebbleLog(t *testing.T, dir string, first, last uint64) {
	t.Helper()
	db, err := pebble.Open(filepath.Join(dir, "log"), &pebble.Options{Logger: quietPebble{}})
	if err != nil {
		t.Fatal(err)
	}
	for i := first; i <= last; i++ {
		l := &raft.Log{Term: 2, Type: raft.LogCommand, Data: bytes.Repeat([]byte{byte(i)}, int(i)), AppendedAt: time.Unix(int64(i), 0)}
		if i == first {
			l.Type, l.AppendedAt = raft.LogConfiguration, time.Time{}
		}
		if err := db.Set(binary.BigEndian.AppendUint64([]byte{'l'}, i), encodePebbleEntry(l), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	db.Set([]byte("sCurrentTerm"), binary.BigEndian.AppendUint64(nil, 7), pebble.Sync)
	db.Set([]byte("sLastVoteTerm"), binary.BigEndian.AppendUint64(nil, 6), pebble.Sync)
	db.Set([]byte("sLastVoteCand"), []byte("m1"), pebble.Sync)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLogStoreMovesPebbleLog: a data directory with the raft log in
// pebble opens with every entry and stable value in raft-wal and the old
// log gone, also when an earlier move was cut short by a crash.
func TestLogStoreMovesPebbleLog(t *testing.T) {
	for _, crashed := range []bool{false, true} {
		dir := t.TempDir()
		writePebbleLog(t, dir, 5, 40)
		if crashed { // a move cut short: a partial WAL beside the old log
			if err := os.MkdirAll(filepath.Join(dir, "wal.migrating"), 0o755); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, "wal.migrating", "00000000000000000001-0000000000000001.wal"), []byte("torn"), 0o644)
		}
		s, err := openLogStore(dir, retention{}, 0, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		first, _ := s.FirstIndex()
		last, _ := s.LastIndex()
		if first != 5 || last != 40 {
			t.Fatalf("crashed=%v: entries %d..%d after the move, want 5..40", crashed, first, last)
		}
		for i := first; i <= last; i++ {
			var l raft.Log
			if err := s.GetLog(i, &l); err != nil {
				t.Fatal(err)
			}
			wantType, wantAt := raft.LogCommand, time.Unix(int64(i), 0)
			if i == first {
				wantType, wantAt = raft.LogConfiguration, time.Time{}
			}
			if l.Index != i || l.Term != 2 || l.Type != wantType || !bytes.Equal(l.Data, bytes.Repeat([]byte{byte(i)}, int(i))) ||
				!l.AppendedAt.Equal(wantAt) {
				t.Fatalf("entry %d read back as %+v", i, l)
			}
		}
		if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
			t.Fatalf("CurrentTerm %d, %v", v, err)
		}
		if v, err := s.GetUint64([]byte("LastVoteTerm")); err != nil || v != 6 {
			t.Fatalf("LastVoteTerm %d, %v", v, err)
		}
		if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "m1" {
			t.Fatalf("LastVoteCand %q, %v", v, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "log")); !os.IsNotExist(err) {
			t.Fatalf("the pebble log is still there: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "wal.migrating")); !os.IsNotExist(err) {
			t.Fatalf("the staging directory is still there: %v", err)
		}
		// Entries stored after the move follow on.
		if err := s.StoreLogs([]*raft.Log{{Index: 41, Term: 3, Type: raft.LogCommand}}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		// Reopened, nothing moves again.
		s, err = openLogStore(dir, retention{}, 0, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		if last, _ := s.LastIndex(); last != 41 {
			t.Fatalf("reopened: last %d, want 41", last)
		}
		s.Close()
	}
}
