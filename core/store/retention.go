package store

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Retention.
//
// A pass looks at the oldest segment (never the one being written) and
// deletes it when it is older than Retention or when the disk is fuller
// than DiskHighWater, then looks at the next, until one stays. Before a
// deletion it asks the store's owner, through RetentionHooks, what the
// segment still holds:
//
//	wanted (age or high water)
//	   │
//	   ├─ Floor hold below the segment's end ─▶ keep; log; tell Held
//	   │
//	   ├─ high water only: Unconsumed hold below the end
//	   │     ├─ DiskHighWaterDropsUnconsumed off ─▶ keep; log; HighWaterHeld
//	   │     └─ on ─▶ delete; log what was dropped; UnconsumedDropped
//	   │
//	   └─ delete
//
// Age is the operator's explicit policy and deletes unconsumed messages;
// high water is an emergency and, by default, does not.

// heldLogEvery rate-limits the logs of a deletion that retention wants but
// a hold stops: a stuck pass repeats every RetentionInterval.
const heldLogEvery = 5 * time.Minute

// maxLoggedHolds bounds the queues one log line lists.
const maxLoggedHolds = 8

// Reasons retention deletes a segment.
const (
	reasonAge       = "retention"
	reasonHighWater = "disk high water"
)

// QueueHold is a claim on the records of one queue from Offset on. The
// store's owner returns holds from its RetentionHooks to say what it still
// needs and who needs it.
type QueueHold struct {
	Topic   string
	QueueID int32
	// Offset is the first queue offset still needed. Below the queue's min
	// offset it means the min offset; at or past its max offset it claims
	// nothing.
	Offset int64
	// Holder says who needs the records, for logs: "group G", "delayed
	// messages of level 3, due within 2h".
	Holder string
}

// RetentionHooks let the store's owner take part in retention; set them
// with SetRetentionHooks. Any of them may be nil. They are called by the
// pass that needs them (the retention goroutine, or RunRetention's
// caller), one pass at a time; the only store lock held is the one that
// serialises passes, so they may read the store but not run retention.
type RetentionHooks struct {
	// Floor lists what every deletion must keep, whatever its reason:
	// records the owner will read again itself (pending delayed and timed
	// messages, unresolved transactions). It is asked only when a pass
	// wants to delete a segment.
	Floor func() []QueueHold
	// Unconsumed lists, per queue, the first record its consumers have not
	// consumed. It is asked only when the disk is above DiskHighWater and a
	// pass is about to delete a segment for that reason, at most once a
	// pass. A segment holding such a record is kept unless
	// DiskHighWaterDropsUnconsumed is set. Without this hook the store
	// knows of no unconsumed records.
	Unconsumed func() []QueueHold
	// Held is told that Floor holds kept a segment a pass wanted to
	// delete: end is the commit-log offset where the segment ends, holds
	// the Floor holds whose first record lies below it. The owner may
	// move what it holds past end (the broker re-appends pending timed
	// messages) so that a later pass can delete the segment. It must not
	// block.
	Held func(end int64, holds []QueueHold)
}

// SetRetentionHooks replaces the retention hooks; the zero value removes
// them. A pass already running keeps the hooks it started with.
func (s *Store) SetRetentionHooks(h RetentionHooks) { s.hooks.Store(&h) }

// retentionState serialises retention passes and holds their rate limits.
type retentionState struct {
	sync.Mutex
	heldLogged      time.Time // last log of a Floor hold
	highWaterLogged time.Time // last log of an unconsumed hold above high water
}

// retentionLoop deletes old segments every RetentionInterval.
func (s *Store) retentionLoop() {
	s.every(s.opts.RetentionInterval, func() {
		if _, err := s.RunRetention(); err != nil {
			s.log.Error("retention failed", "err", err)
		}
	})
}

// RunRetention deletes every segment whose last write is older than the
// retention time, and the oldest segments while the disk is fuller than
// the high-water mark, as far as the retention hooks allow (see
// RetentionHooks). The segment being written is never deleted. It returns
// how many segments were deleted; consume-queue min offsets move past the
// records that went with them. Passes run one at a time.
func (s *Store) RunRetention() (int, error) {
	s.ret.Lock()
	defer s.ret.Unlock()
	var hooks RetentionHooks
	if h := s.hooks.Load(); h != nil {
		hooks = *h
	}
	now := s.opts.Now()
	deleted := 0
	advanced := true // queue min offsets reflect every deletion so far
	var unconsumed []resolvedHold
	asked := false          // Unconsumed was asked this pass
	droppedEnd := int64(-1) // end of the last segment deleted past unconsumed records
	for {
		s.cl.mu.RLock()
		if len(s.cl.segs) < 2 {
			s.cl.mu.RUnlock()
			break
		}
		oldest := s.cl.segs[0]
		s.cl.mu.RUnlock()
		if oldest.base >= s.written.Load()-s.written.Load()%s.opts.SegmentSize {
			break // the active segment
		}
		end := oldest.base + s.opts.SegmentSize
		fi, err := oldest.f.Stat()
		if err != nil {
			return deleted, fmt.Errorf("store: stat %s: %w", oldest.name, err)
		}
		reason, used := s.deletionReason(now, fi.ModTime())
		if reason == "" {
			break
		}
		if s.opts.WriteAhead && end > s.repl.floor.Load() {
			break // rounds the replicated log may apply again (HoldRoundsFrom)
		}
		if hooks.Floor != nil {
			if held := below(s.resolveHolds(hooks.Floor()), end); len(held) > 0 {
				s.stats.SegmentsHeld.Add(1)
				s.logFloorHeld(now, oldest.name, reason, held)
				if hooks.Held != nil {
					hooks.Held(end, plainHolds(held))
				}
				break
			}
		}
		if reason == reasonHighWater && hooks.Unconsumed != nil {
			if !asked {
				// Ask after the min offsets moved past what this pass
				// already deleted, so the holds start at records that
				// still exist.
				if !advanced {
					if err := s.advanceMinOffsets(); err != nil {
						return deleted, err
					}
					advanced = true
				}
				unconsumed, asked = s.resolveHolds(hooks.Unconsumed()), true
			}
			if held := below(unconsumed, end); len(held) > 0 {
				if !s.opts.DiskHighWaterDropsUnconsumed {
					s.stats.HighWaterHeld.Add(1)
					s.logHighWaterHeld(now, oldest.name, used, held)
					break
				}
				droppedEnd = end
			}
		}
		if err := s.deleteSegment(oldest); err != nil {
			return deleted, err
		}
		deleted++
		advanced = false
		s.stats.SegmentsFreed.Add(1)
		s.log.Info("segment deleted", "segment", oldest.name, "reason", reason, "modified", fi.ModTime())
	}
	if !advanced {
		if err := s.advanceMinOffsets(); err != nil {
			return deleted, err
		}
	}
	if droppedEnd >= 0 {
		s.reportDropped(below(unconsumed, droppedEnd))
	}
	return deleted, nil
}

// deletionReason says why the segment last written at modified should go,
// "" if it should stay, and the disk's used fraction when it was read.
func (s *Store) deletionReason(now, modified time.Time) (reason string, used float64) {
	if s.opts.Retention > 0 && now.Sub(modified) > s.opts.Retention {
		return reasonAge, 0
	}
	if s.opts.DiskHighWater > 0 {
		if du, err := s.opts.FS.GetDiskUsage(s.opts.Dir); err == nil && du.TotalBytes > 0 {
			used = float64(du.UsedBytes) / float64(du.TotalBytes)
			if used > s.opts.DiskHighWater {
				return reasonHighWater, used
			}
		}
	}
	return "", used
}

// resolvedHold is a QueueHold with the position of its first record that
// still exists.
type resolvedHold struct {
	QueueHold
	first int64 // queue offset of the first record held
	off   int64 // its commit-log offset
}

// resolveHolds finds the first record each hold claims and returns the
// holds that claim one, lowest commit-log offset first.
func (s *Store) resolveHolds(holds []QueueHold) []resolvedHold {
	out := make([]resolvedHold, 0, len(holds))
	for _, h := range holds {
		it := s.NewQueueIter(h.Topic, h.QueueID, IterOptions{UnitsOnly: true, MaxRecords: 1})
		if it.SeekGE(h.Offset) {
			out = append(out, resolvedHold{QueueHold: h, first: it.Offset(), off: it.Unit().CommitLogOffset})
		} else if err := it.Error(); err != nil {
			// Unreadable: keep from the start rather than guess.
			s.log.Error("retention cannot read a held queue; keeping it whole", "topic", h.Topic, "queue", h.QueueID, "err", err)
			out = append(out, resolvedHold{QueueHold: h, first: h.Offset, off: -1})
		}
		it.Close()
	}
	slices.SortFunc(out, func(a, b resolvedHold) int { return cmp.Compare(a.off, b.off) })
	return out
}

// below returns the leading holds of sorted whose first record lies before
// the commit-log offset end.
func below(sorted []resolvedHold, end int64) []resolvedHold {
	n := 0
	for n < len(sorted) && sorted[n].off < end {
		n++
	}
	return sorted[:n]
}

func plainHolds(rs []resolvedHold) []QueueHold {
	out := make([]QueueHold, len(rs))
	for i, r := range rs {
		out[i] = r.QueueHold
	}
	return out
}

// describeHolds lists up to maxLoggedHolds holds for a log line.
func describeHolds(rs []resolvedHold, count func(resolvedHold) string) string {
	var b strings.Builder
	for i, r := range rs {
		if i == maxLoggedHolds {
			fmt.Fprintf(&b, "; and %d more", len(rs)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s/%d", r.Topic, r.QueueID)
		if count != nil {
			b.WriteString(count(r))
		}
		fmt.Fprintf(&b, " from offset %d: %s", r.first, r.Holder)
	}
	return b.String()
}

// logFloorHeld says, at most every heldLogEvery, that Floor holds kept a
// segment retention wanted gone.
func (s *Store) logFloorHeld(now time.Time, segment, reason string, held []resolvedHold) {
	if !s.ret.heldLogged.IsZero() && now.Sub(s.ret.heldLogged) < heldLogEvery {
		return
	}
	s.ret.heldLogged = now
	s.log.Warn("segment kept although retention wants it deleted: records in it are still needed",
		"segment", segment, "wanted", reason, "heldBy", describeHolds(held, nil))
}

// logHighWaterHeld says loudly, at most every heldLogEvery, that the disk
// is above high water and unconsumed messages keep the oldest segment.
func (s *Store) logHighWaterHeld(now time.Time, segment string, used float64, held []resolvedHold) {
	if !s.ret.highWaterLogged.IsZero() && now.Sub(s.ret.highWaterLogged) < heldLogEvery {
		return
	}
	s.ret.highWaterLogged = now
	oldest := held[0]
	s.log.Error("DISK ABOVE HIGH WATER: the oldest segment holds unconsumed messages and is kept; sends will fail with disk full when space runs out",
		"used", fmt.Sprintf("%.1f%%", used*100), "highWater", fmt.Sprintf("%.1f%%", s.opts.DiskHighWater*100),
		"segment", segment,
		"oldestTopic", oldest.Topic, "oldestQueue", oldest.QueueID, "oldestOffset", oldest.first, "oldestHeldBy", oldest.Holder,
		"unconsumedQueues", describeHolds(held, nil),
		"todo", "consume them, reset or delete the holding groups' offsets, free disk, "+
			"or set store.diskHighWaterDropsUnconsumed: true to delete unconsumed messages above high water")
}

// reportDropped counts and logs the unconsumed messages a pass deleted
// above high water: from each hold's first record to its queue's new min
// offset.
func (s *Store) reportDropped(held []resolvedHold) {
	var total int64
	lost := make(map[queueKey]int64, len(held))
	for _, r := range held {
		if n := s.MinOffset(r.Topic, r.QueueID) - r.first; n > 0 {
			lost[queueKey{r.Topic, r.QueueID}] = n
			total += n
		}
	}
	if total == 0 {
		return
	}
	s.stats.UnconsumedDropped.Add(total)
	s.log.Error("DISK ABOVE HIGH WATER: deleted unconsumed messages (diskHighWaterDropsUnconsumed is set)",
		slog.Int64("messages", total), slog.Int("queues", len(lost)),
		slog.String("dropped", describeHolds(held, func(r resolvedHold) string {
			return fmt.Sprintf(": %d messages", lost[queueKey{r.Topic, r.QueueID}])
		})))
}

func (s *Store) deleteSegment(seg *segment) error {
	s.cl.mu.Lock()
	defer s.cl.mu.Unlock()
	if len(s.cl.segs) == 0 || s.cl.segs[0] != seg {
		return nil
	}
	seg.f.Close()
	if err := s.cl.fs.Remove(s.cl.fs.PathJoin(s.cl.dir, seg.name)); err != nil {
		return fmt.Errorf("store: remove segment %s: %w", seg.name, err)
	}
	s.cl.segs = s.cl.segs[1:]
	return s.cl.syncDir()
}

// advanceMinOffsets moves every queue's min offset to its first unit whose
// record is still in the log and drops the index blocks before it.
func (s *Store) advanceMinOffsets() error {
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	logMin := s.cl.minOffset()
	b := s.db.NewBatch()
	defer b.Close()
	var units []Unit
	for _, info := range s.Queues() {
		k := queueKey{info.Topic, info.QueueID}
		newMin := info.MinOffset
		for newMin < info.MaxOffset {
			var err error
			units, err = s.units(k.topic, k.id, newMin, blockUnits, units[:0])
			if err != nil || len(units) == 0 {
				break
			}
			i := 0
			for i < len(units) && (units[i].Size == 0 || units[i].CommitLogOffset < logMin) {
				i++
			}
			newMin += int64(i)
			if i < len(units) {
				break
			}
		}
		if newMin == info.MinOffset {
			continue
		}
		s.cq.Lock()
		q := s.cq.queues[k]
		if q == nil {
			s.cq.Unlock()
			continue // its topic was deleted
		}
		q.min = max(q.min, newMin)
		s.cq.Unlock()
		b.Set(queueRegKey(k), int64Value(newMin), nil)
		if no := newMin / blockUnits; no > 0 {
			b.DeleteRange(blockKey(k, 0), blockKey(k, no), nil)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("store: write min offsets: %w", err)
	}
	if s.keys != nil {
		s.keys.dropBelow(logMin)
	}
	return nil
}

// TrimQueue moves a queue's min offset up to newMin (never past its max
// offset, never down), as retention does, and drops the index blocks
// wholly below it. The records stay in the commit log until retention
// deletes their segments; the queue no longer serves them.
func (s *Store) TrimQueue(topic string, queueID int32, newMin int64) error {
	k := queueKey{topic, queueID}
	s.indexMu.Lock()
	defer s.indexMu.Unlock()
	s.cq.Lock()
	q := s.cq.queues[k]
	if q == nil || newMin <= q.min {
		s.cq.Unlock()
		return nil
	}
	newMin = min(newMin, q.next)
	q.min = newMin
	s.cq.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	b.Set(queueRegKey(k), int64Value(newMin), nil)
	if no := newMin / blockUnits; no > 0 {
		b.DeleteRange(blockKey(k, 0), blockKey(k, no), nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("store: trim %s/%d: %w", topic, queueID, err)
	}
	return nil
}
