package store

import (
	"encoding/binary"
)

// Consume-queue units and blocks.
const (
	// unitLen is one consume-queue unit: commit-log offset, size, tag code.
	unitLen = 8 + 4 + 8
	// blockUnits is the number of units kept under one index key, so that
	// the index costs one key per 64 messages of a queue.
	blockUnits = 64
	blockLen   = unitLen * blockUnits
)

// Unit is one consume-queue entry: where a queue's message lives in the
// commit log and its tag code.
type Unit struct {
	QueueOffset     int64 // the unit's position in its queue
	CommitLogOffset int64
	Size            int32 // record length without the CRC trailer; 0 marks a hole
	TagCode         int64 // tag hash, or the delivery time for scheduled messages
}

func putUnit(b []byte, u Unit) {
	binary.BigEndian.PutUint64(b, uint64(u.CommitLogOffset))
	binary.BigEndian.PutUint32(b[8:], uint32(u.Size))
	binary.BigEndian.PutUint64(b[12:], uint64(u.TagCode))
}

func getUnit(b []byte, qoff int64) Unit {
	return Unit{
		QueueOffset:     qoff,
		CommitLogOffset: int64(binary.BigEndian.Uint64(b)),
		Size:            int32(binary.BigEndian.Uint32(b[8:])),
		TagCode:         int64(binary.BigEndian.Uint64(b[12:])),
	}
}

type queueKey struct {
	topic string
	id    int32
}

// queue is the in-memory state of one consume queue.
type queue struct {
	key queueKey

	// assigned is the next queue offset to hand out. Guarded by Store.mu.
	assigned int64

	// The rest is guarded by Store.cq.
	next       int64  // one past the last dispatched unit (the max offset)
	min        int64  // first retained offset
	openNo     int64  // block number of open
	open       []byte // the block being filled, blockLen bytes, len = used bytes
	prevNo     int64  // block number of prev, -1 if none
	prev       []byte // the last completed block, kept for readers of the tail
	dirty      bool   // open has units not yet written to the index
	registered bool   // the queue registry key is in the index
	arrivals   bool   // received units in the current dispatch round
	deleted    bool   // its topic was deleted: units still in flight are dropped
}

func newQueue(k queueKey) *queue {
	return &queue{key: k, open: make([]byte, 0, blockLen), prevNo: -1}
}

// units returns the units of block no held in memory, if any.
func (q *queue) memBlock(no int64) []byte {
	switch no {
	case q.openNo:
		return q.open
	case q.prevNo:
		return q.prev
	}
	return nil
}
