package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

// migrateLog moves a raft log kept in pebble (oldDir, the layout before
// raft-wal) into a WAL at walDir, once: the entries, then the stable
// values, into walDir.migrating, which is renamed to walDir when
// complete, and only then oldDir is removed. A crash at any point leaves
// either the old log or the complete new one; a half-built
// walDir.migrating is built again.
//
// The pebble log's layout:
//
//	'l' index(8)  → term(8) type(1) appendedAt(8) dataLen(4) data extensions
//	's' key       → value (uint64 values big-endian; raft-wal's are little-endian)
func migrateLog(oldDir, walDir string, hlog hclog.Logger) error {
	if _, err := os.Stat(walDir); err == nil {
		// Complete: the old log, if still there, was left by a crash
		// between the rename and its removal.
		return os.RemoveAll(oldDir)
	}
	if _, err := os.Stat(oldDir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	tmp := walDir + ".migrating"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	db, err := pebble.Open(oldDir, &pebble.Options{Logger: quietPebble{}, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("cluster: open the raft log to move it: %w", err)
	}
	w, err := wal.Open(tmp, wal.WithLogger(hlog.Named("wal")))
	if err != nil {
		db.Close()
		return fmt.Errorf("cluster: raft log: %w", err)
	}
	start := time.Now()
	n, err := copyPebbleLog(db, w)
	err = errors.Join(err, w.Close(), db.Close())
	if err != nil {
		return fmt.Errorf("cluster: moving the raft log into raft-wal: %w", err)
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, walDir); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(walDir)); err != nil {
		return err
	}
	hlog.Info("moved the raft log from pebble into raft-wal", "entries", n, "took", time.Since(start).Round(time.Millisecond))
	return os.RemoveAll(oldDir)
}

// copyPebbleLog copies every entry and stable value of db into w and
// returns the number of entries.
func copyPebbleLog(db *pebble.DB, w *wal.WAL) (int, error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{'l'}, UpperBound: []byte{'l' + 1}})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var batch []*raft.Log
	var size, n int
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := w.StoreLogs(batch)
		batch, size = batch[:0], 0
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return n, err
		}
		l, err := decodePebbleEntry(binary.BigEndian.Uint64(it.Key()[1:]), v)
		if err != nil {
			return n, err
		}
		batch = append(batch, l)
		n++
		if size += len(v); size >= 4<<20 || len(batch) >= 1024 {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := it.Error(); err != nil {
		return n, err
	}
	if err := flush(); err != nil {
		return n, err
	}
	st, err := db.NewIter(&pebble.IterOptions{LowerBound: []byte{'s'}, UpperBound: []byte{'s' + 1}})
	if err != nil {
		return n, err
	}
	defer st.Close()
	for ok := st.First(); ok; ok = st.Next() {
		k, v := string(st.Key()[1:]), st.Value()
		switch k {
		case "CurrentTerm", "LastVoteTerm": // raft's uint64 values
			if len(v) != 8 {
				return n, fmt.Errorf("stable value %q is %d bytes", k, len(v))
			}
			err = w.SetUint64([]byte(k), binary.BigEndian.Uint64(v))
		default:
			err = w.Set([]byte(k), append([]byte(nil), v...))
		}
		if err != nil {
			return n, err
		}
	}
	return n, st.Error()
}

// decodePebbleEntry decodes an entry of the pebble log's layout.
func decodePebbleEntry(index uint64, v []byte) (*raft.Log, error) {
	if len(v) < 21 {
		return nil, fmt.Errorf("raft log entry %d is %d bytes", index, len(v))
	}
	l := &raft.Log{Index: index, Term: binary.BigEndian.Uint64(v), Type: raft.LogType(v[8])}
	if at := int64(binary.BigEndian.Uint64(v[9:])); at > 0 {
		l.AppendedAt = time.Unix(0, at)
	}
	dl := int(binary.BigEndian.Uint32(v[17:]))
	if len(v) < 21+dl {
		return nil, fmt.Errorf("raft log entry %d is cut short", index)
	}
	l.Data = append([]byte(nil), v[21:21+dl]...)
	if ext := v[21+dl:]; len(ext) > 0 {
		l.Extensions = append([]byte(nil), ext...)
	}
	return l, nil
}

// quietPebble drops pebble's informational lines; errors still surface
// through the calls that fail.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any) {}
func (quietPebble) Errorf(format string, a ...any) {
	slog.Error(fmt.Sprintf(format, a...), "component", "raft-log")
}
func (quietPebble) Fatalf(format string, a ...any) { panic(fmt.Sprintf(format, a...)) }

// syncDir fsyncs a directory, making the entries created or renamed in
// it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
