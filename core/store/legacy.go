package store

import (
	"fmt"

	"github.com/rmq-go/rmq/core/message"
)

// Units is units, exported until every reader outside the store uses a
// QueueIter.
func (s *Store) Units(topic string, queueID int32, from int64, max int, dst []Unit) ([]Unit, error) {
	return s.units(topic, queueID, from, max, dst)
}

// ReadRecords reads the records of units, in order, and calls fn with each.
// Adjacent records are read together. A record that fails its checksum, or
// a hole, is reported to fn as an error wrapping ErrCorruption and counted;
// fn decides whether to go on. The record passed to fn aliases a buffer
// that is reused after fn returns. buf is scratch space (may be nil); the
// grown buffer is returned for reuse.
func (s *Store) ReadRecords(units []Unit, buf []byte, fn func(u Unit, r message.Record, err error) error) ([]byte, error) {
	for i := 0; i < len(units); {
		u := units[i]
		if u.Size <= 0 {
			s.stats.Corruptions.Add(1)
			if err := fn(u, nil, fmt.Errorf("%w: queue offset %d: record lost (hole)", ErrCorruption, u.QueueOffset)); err != nil {
				return buf, err
			}
			i++
			continue
		}
		// Extend the span over records that follow each other in the log.
		j := i + 1
		span := int64(u.Size) + trailerLen
		for j < len(units) {
			n := units[j]
			if n.Size <= 0 || n.CommitLogOffset != u.CommitLogOffset+span || span+int64(n.Size)+trailerLen > maxReadSpan ||
				n.CommitLogOffset/s.opts.SegmentSize != u.CommitLogOffset/s.opts.SegmentSize {
				break
			}
			span += int64(n.Size) + trailerLen
			j++
		}
		if int64(cap(buf)) < span {
			buf = make([]byte, span)
		}
		buf = buf[:span]
		if err := s.cl.readAt(buf, u.CommitLogOffset); err != nil {
			return buf, err
		}
		at := int64(0)
		for _, v := range units[i:j] {
			n := int64(v.Size) + trailerLen
			rec, err := checkFrame(buf[at:at+n], v.CommitLogOffset)
			if err != nil {
				s.reportCorruption(err)
			}
			if err := fn(v, rec, err); err != nil {
				return buf, err
			}
			at += n
		}
		i = j
	}
	return buf, nil
}
