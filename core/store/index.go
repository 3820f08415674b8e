package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Index key kinds (see doc.go).
const (
	kindBlock      = 'q'
	kindQueue      = 'Q'
	kindCheckpoint = 'c'
	kindProgress   = 'p'
	kindMeta       = 'M'
	kindDeleted    = 'D'
	kindFormat     = 'F'
	// kindOldKeyIndex held key-index entries before the key index moved
	// to its own files; recovery deletes any it finds.
	kindOldKeyIndex = 'k'
)

func queuePrefix(kind byte, k queueKey) []byte {
	b := make([]byte, 0, 1+len(k.topic)+1+4+8)
	b = append(b, kind)
	b = append(b, k.topic...)
	b = append(b, 0)
	return binary.BigEndian.AppendUint32(b, uint32(k.id))
}

func blockKey(k queueKey, no int64) []byte {
	return binary.BigEndian.AppendUint64(queuePrefix(kindBlock, k), uint64(no))
}

func queueRegKey(k queueKey) []byte { return queuePrefix(kindQueue, k) }

// parseQueueRegKey reverses queueRegKey.
func parseQueueRegKey(key []byte) (queueKey, error) {
	if len(key) < 1+1+4 || key[0] != kindQueue || key[len(key)-5] != 0 {
		return queueKey{}, fmt.Errorf("%w: queue registry key %q", ErrCorruption, key)
	}
	return queueKey{
		topic: string(key[1 : len(key)-5]),
		id:    int32(binary.BigEndian.Uint32(key[len(key)-4:])),
	}, nil
}

var checkpointKey = []byte{kindCheckpoint}

func deletedKey(topic string) []byte { return append([]byte{kindDeleted}, topic...) }

func progressKey(name string) []byte { return append([]byte{kindProgress}, name...) }
func metaKey(name string) []byte     { return append([]byte{kindMeta}, name...) }

// prefixEnd returns the first key after every key that starts with p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// getInt64 reads an 8-byte value, reporting whether the key exists.
func getInt64(db *pebble.DB, key []byte) (int64, bool, error) {
	v, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, false, fmt.Errorf("%w: value of %q has %d bytes, want 8", ErrCorruption, key, len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), true, nil
}

func int64Value(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// pebbleLogger routes pebble's logs to slog.
type pebbleLogger struct{ s *Store }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.s.log.Debug(fmt.Sprintf(format, args...), "component", "index")
}

// Errorf logs at most one error every indexErrorEvery, with the count of
// those left out since the last: pebble repeats a failed background job
// at once, and a disk that stays full made it log thousands a second.
func (l pebbleLogger) Errorf(format string, args ...any) {
	e := &l.s.indexErrors
	e.Lock()
	now := time.Now()
	if !e.last.IsZero() && now.Sub(e.last) < indexErrorEvery {
		e.dropped++
		e.Unlock()
		return
	}
	dropped := e.dropped
	e.last, e.dropped = now, 0
	e.Unlock()
	l.s.log.Error(fmt.Sprintf(format, args...), "component", "index", "suppressed", dropped)
}

// indexErrorEvery bounds the index's error logs.
const indexErrorEvery = 10 * time.Second

// indexErrorLog is the rate limit of pebbleLogger.Errorf.
type indexErrorLog struct {
	sync.Mutex
	last    time.Time // last error logged
	dropped int       // errors left out since
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.s.log.Error(fmt.Sprintf(format, args...), "component", "index")
	panic(fmt.Sprintf(format, args...))
}
