// Package ratelog logs lines of a kind at most once per interval, so that
// a peer that keeps hitting a limit or sending bad requests cannot turn
// them into a flood of log lines. Each line logged says how many of its
// kind were not logged since the one before.
//
// # Invariants
//
//  1. A kind is logged at most once per interval; the first line of a
//     kind is always logged.
//  2. The table of kinds holds at most maxKinds entries: past that, kinds
//     whose last line is older than the interval are forgotten (they would
//     be logged at their next line anyway), so many distinct kinds cost
//     bounded memory.
package ratelog

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// maxKinds bounds the table of kinds.
const maxKinds = 4096

// Log is a rate-limited logger. Its methods are safe for concurrent use.
type Log struct {
	logger   *slog.Logger
	interval time.Duration
	mu       struct {
		sync.Mutex
		kinds map[string]*kind
	}
}

type kind struct {
	last       time.Time
	suppressed int
}

// New returns a Log that writes to logger at most one line of each kind
// per interval.
func New(logger *slog.Logger, interval time.Duration) *Log {
	l := &Log{logger: logger, interval: interval}
	l.mu.kinds = make(map[string]*kind)
	return l
}

// Warn logs msg at Warn level unless a line of the same kind was logged in
// the last interval.
func (l *Log) Warn(kind, msg string, args ...any) { l.Log(slog.LevelWarn, kind, msg, args...) }

// Info is Warn at Info level, for limits that healthy peers hit too.
func (l *Log) Info(kind, msg string, args ...any) { l.Log(slog.LevelInfo, kind, msg, args...) }

// Log logs msg at level unless a line of the same kind was logged in the
// last interval.
func (l *Log) Log(level slog.Level, kindName, msg string, args ...any) {
	now := time.Now()
	l.mu.Lock()
	k := l.mu.kinds[kindName]
	if k == nil {
		if len(l.mu.kinds) >= maxKinds {
			l.pruneLocked(now)
		}
		k = new(kind)
		l.mu.kinds[kindName] = k
	}
	if !k.last.IsZero() && now.Sub(k.last) < l.interval {
		k.suppressed++
		l.mu.Unlock()
		return
	}
	k.last = now
	suppressed := k.suppressed
	k.suppressed = 0
	l.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "similar_not_logged", suppressed)
	}
	l.logger.Log(context.Background(), level, msg, args...)
}

// pruneLocked forgets the kinds not logged within the interval; if every
// kind was, it forgets them all but keeps the table's bound.
func (l *Log) pruneLocked(now time.Time) {
	for name, k := range l.mu.kinds {
		if now.Sub(k.last) >= l.interval {
			delete(l.mu.kinds, name)
		}
	}
	if len(l.mu.kinds) >= maxKinds {
		clear(l.mu.kinds)
	}
}
