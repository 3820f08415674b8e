package store

import "errors"

// Errors returned by the store. Compare with errors.Is.
var (
	// ErrClosed is returned by calls on a closed Store.
	ErrClosed = errors.New("store: closed")
	// ErrCorruption marks every failure caused by bytes on disk that do not
	// hold what they should: a record whose checksum does not match, a
	// malformed frame, an index unit pointing nowhere.
	ErrCorruption = errors.New("store: corruption")
	// ErrNotFound is returned when no record, unit or value exists at the
	// requested position or key.
	ErrNotFound = errors.New("store: not found")
	// ErrOffsetGone is returned when a commit-log offset lies below the
	// oldest retained segment.
	ErrOffsetGone = errors.New("store: offset deleted by retention")
	// ErrTooLarge is returned when an append cannot fit in one segment.
	ErrTooLarge = errors.New("store: append larger than a segment")
	// ErrFailed is returned by appends after a write or fsync failure that
	// could not be rolled back; the store serves reads but takes no writes
	// until it is reopened.
	ErrFailed = errors.New("store: failed, read-only until reopened")
	// ErrDiskFull is returned by appends while the filesystem has less
	// free space than Options.DiskReserve, or after a write found it full;
	// the store serves reads meanwhile and takes appends again, without a
	// reopen, once space is freed.
	ErrDiskFull = errors.New("store: disk full")
	// ErrBadName is returned for a consumer offset whose group or topic is
	// empty or holds a NUL byte, the separator of the offset's key.
	ErrBadName = errors.New("store: invalid group or topic name")
	// ErrDeletionSkipped is returned by DeleteTopic on a replicated store
	// when the set's log ordered the deletion after rounds written past
	// the offset it was proposed at: no member applied it.
	ErrDeletionSkipped = errors.New("store: topic deletion ordered after later writes, not applied")
	// ErrLocked is returned by Open when another Store holds the directory.
	ErrLocked = errors.New("store: directory in use")
)
