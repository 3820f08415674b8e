package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/hashicorp/raft"
	"github.com/rmq-go/rmq/core/store"
)

// The pointer log: raft-wal keeps every entry of raft's log but the
// store's rounds as it is (raft's configuration, no-op and barrier
// entries, and the store's progress, metadata, key and deletion entries,
// all small). A round's bytes go to the commit log, once, when the entry
// is stored, and the WAL keeps a pointer in its place:
//
//	pointerKind(1) id(8) crc(4) n(4) {off(8) len(4)}...
//
// id and the chunks' offsets and lengths are the round entry's; crc is
// the CRC-32C of the whole round entry, checked when GetLog rebuilds it
// from the commit log, so a read never passes other bytes (a round cut
// and replaced at the same offsets, say) off as the entry raft stored.
// A round entry stored whole (by a member before the pointer log) is
// read back as it is.

// pointerKind is the first byte of a pointer. The store's entries begin
// with a kind of their own (store.Apply refuses any other), so no
// command the store proposes begins with it.
const pointerKind = 0xFE

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errBadPointer is a pointer that does not decode.
var errBadPointer = errors.New("cluster: malformed round pointer")

// isPointer reports whether l holds a pointer.
func isPointer(l *raft.Log) bool {
	return l.Type == raft.LogCommand && len(l.Data) > 0 && l.Data[0] == pointerKind
}

// makePointer returns the pointer for a round entry and the offset where
// the round begins; ok is false for an entry that is not a round (or a
// round without chunks, which the commit log has nothing of).
func makePointer(entry []byte) (p []byte, start int64, ok bool, err error) {
	id, spans, ok, err := store.ParseRound(entry)
	if !ok || err != nil || len(spans) == 0 {
		return nil, 0, false, err
	}
	return encodePointer(id, crc32.Checksum(entry, castagnoli), spans), spans[0].Off, true, nil
}

func encodePointer(id uint64, crc uint32, spans []store.RoundSpan) []byte {
	p := make([]byte, 0, 1+8+4+4+12*len(spans))
	p = append(p, pointerKind)
	p = binary.BigEndian.AppendUint64(p, id)
	p = binary.BigEndian.AppendUint32(p, crc)
	p = binary.BigEndian.AppendUint32(p, uint32(len(spans)))
	for _, sp := range spans {
		p = binary.BigEndian.AppendUint64(p, uint64(sp.Off))
		p = binary.BigEndian.AppendUint32(p, uint32(sp.Len))
	}
	return p
}

// decodePointer reads a pointer: the round's id, the CRC of its entry and
// its chunks, which follow each other in the log.
func decodePointer(p []byte) (id uint64, crc uint32, spans []store.RoundSpan, err error) {
	if len(p) < 17 || p[0] != pointerKind {
		return 0, 0, nil, errBadPointer
	}
	id = binary.BigEndian.Uint64(p[1:])
	crc = binary.BigEndian.Uint32(p[9:])
	n := binary.BigEndian.Uint32(p[13:])
	p = p[17:]
	if n == 0 || uint64(len(p)) != 12*uint64(n) {
		return 0, 0, nil, errBadPointer
	}
	spans = make([]store.RoundSpan, n)
	for i := range spans {
		off := binary.BigEndian.Uint64(p)
		size := binary.BigEndian.Uint32(p[8:])
		p = p[12:]
		if off > 1<<62 || size > 1<<31-1 {
			return 0, 0, nil, errBadPointer
		}
		spans[i] = store.RoundSpan{Off: int64(off), Len: int(size)}
		if i > 0 && spans[i].Off < spans[i-1].Off+int64(spans[i-1].Len) {
			return 0, 0, nil, errBadPointer
		}
	}
	return id, crc, spans, nil
}

// readPointer rebuilds the round entry a pointer stands for from the
// commit log of st.
func readPointer(st *store.Store, p []byte) ([]byte, error) {
	id, crc, spans, err := decodePointer(p)
	if err != nil {
		return nil, err
	}
	entry, err := st.ReadRound(id, spans)
	if err != nil {
		return nil, err
	}
	if got := crc32.Checksum(entry, castagnoli); got != crc {
		return nil, fmt.Errorf("%w: round %d at %d: the commit log holds other bytes (CRC %08x, want %08x)",
			store.ErrCorruption, id, spans[0].Off, got, crc)
	}
	return entry, nil
}

// roundSpan returns where the round an entry stores (by pointer or whole)
// begins and ends in the commit log; ok is false for any other entry.
func roundSpan(l *raft.Log) (start, end int64, ok bool, err error) {
	if l.Type != raft.LogCommand {
		return 0, 0, false, nil
	}
	var spans []store.RoundSpan
	if isPointer(l) {
		_, _, spans, err = decodePointer(l.Data)
		ok = true
	} else {
		_, spans, ok, err = store.ParseRound(l.Data)
	}
	if !ok || err != nil || len(spans) == 0 {
		return 0, 0, false, err
	}
	last := spans[len(spans)-1]
	return spans[0].Off, last.Off + int64(last.Len), true, nil
}

// roundStart is roundSpan's start.
func roundStart(l *raft.Log) (int64, bool, error) {
	start, _, ok, err := roundSpan(l)
	return start, ok, err
}
