package natsbridge

import (
	"errors"

	"github.com/rmq-go/rmq/core/outbox"
)

// Source is the outbox the bridge reads, and the durable counters it keeps
// its cursor and epoch in. The wiring (internal/server) adapts the broker
// and its store to it; tests use a fake.
type Source interface {
	// EventOffsets returns the first retained and the next outbox offset.
	EventOffsets() (minOff, maxOff int64)
	// WaitEvents returns a channel closed when events are stored after the
	// call.
	WaitEvents() <-chan struct{}
	// ReadEvents appends up to max events from offset from to dst. It
	// reads max positions (fewer at the end of the outbox) and leaves out
	// the ones it cannot decode. An offset below the retained range is an
	// error.
	ReadEvents(from int64, max int, dst []outbox.Event) ([]outbox.Event, error)
	// Progress and SetProgress read and set a durable counter;
	// FlushProgress makes the counters durable now.
	Progress(name string) (int64, bool)
	SetProgress(name string, v int64)
	FlushProgress() error
}

// Resender resends dead letters and keeps small durable records (the
// resend service's idempotency keys). The wiring (internal/server) adapts
// the broker and its store to it; tests use a fake.
type Resender interface {
	// ListDLQ and ResendDLQ list and resend a group's dead letters; a
	// selector that matches nothing gives outbox.ErrNoDeadLetter.
	ListDLQ(sel outbox.DLQSelector) ([]outbox.DeadLetter, error)
	ResendDLQ(sel outbox.DLQSelector, target string) ([]outbox.Resent, error)
	// Record returns a durable record; ok is false when there is none.
	Record(name string) (v []byte, ok bool, err error)
	// PutRecord and DeleteRecord write and remove a record durably
	// before they return.
	PutRecord(name string, v []byte) error
	DeleteRecord(name string) error
	// EachRecord calls fn for every record whose name starts with prefix,
	// in name order, stopping at the first error.
	EachRecord(prefix string, fn func(name string, v []byte) error) error
}

// Errors returned by the bridge. Compare with errors.Is.
var (
	// ErrNotStarted is returned by Shutdown before Start.
	ErrNotStarted = errors.New("natsbridge: not started")
	// ErrBadRequest marks a resend request the service refuses to run.
	ErrBadRequest = errors.New("natsbridge: bad resend request")
	// ErrKeyConflict is returned for a resend whose idempotency key was
	// already used for a different request.
	ErrKeyConflict = errors.New("natsbridge: idempotency key used for another request")
	// ErrInterrupted is returned for a resend whose key was claimed by a
	// request the broker stopped in the middle of: it may or may not have
	// been resent, and the service will not guess.
	ErrInterrupted = errors.New("natsbridge: an earlier resend with this key was interrupted")
)

// Durable counter and record names, under the Source's namespace.
const (
	cursorName   = "natsbridge/cursor"
	epochName    = "natsbridge/epoch"
	resendPrefix = "natsbridge/resend/"
)
