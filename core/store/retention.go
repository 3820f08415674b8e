package store

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

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
// the high-water mark. The segment being written is never deleted. It
// returns how many segments were deleted; consume-queue min offsets move
// past the records that went with them.
func (s *Store) RunRetention() (int, error) {
	now := s.opts.Now()
	deleted := 0
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
		if f := s.floor.Load(); f != nil {
			if keep := (*f)(); keep >= 0 && keep < oldest.base+s.opts.SegmentSize {
				break // holds something the broker still needs
			}
		}
		fi, err := oldest.f.Stat()
		if err != nil {
			return deleted, fmt.Errorf("store: stat %s: %w", oldest.name, err)
		}
		reason := ""
		if s.opts.Retention > 0 && now.Sub(fi.ModTime()) > s.opts.Retention {
			reason = "retention"
		} else if s.opts.DiskHighWater > 0 {
			if du, err := s.opts.FS.GetDiskUsage(s.opts.Dir); err == nil && du.TotalBytes > 0 &&
				float64(du.UsedBytes)/float64(du.TotalBytes) > s.opts.DiskHighWater {
				reason = "disk high water"
			}
		}
		if reason == "" {
			break
		}
		if err := s.deleteSegment(oldest); err != nil {
			return deleted, err
		}
		deleted++
		s.stats.SegmentsFreed.Add(1)
		s.log.Info("segment deleted", "segment", oldest.name, "reason", reason, "modified", fi.ModTime())
	}
	if deleted > 0 {
		if err := s.advanceMinOffsets(); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
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
	return nil
}

// TrimQueue moves a queue's min offset up to newMin (never past its max
// offset, never down), as retention does, and drops the index blocks
// wholly below it. The records stay in the commit log until retention
// deletes their segments; the queue no longer serves them.
func (s *Store) TrimQueue(topic string, queueID int32, newMin int64) error {
	k := queueKey{topic, queueID}
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
