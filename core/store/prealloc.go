package store

import (
	"fmt"
	"sync"
)

// Preallocation: an fdatasync that also has to persist a grown file size
// costs several times one that only covers data overwritten in place
// (measured here: 64 KiB append + fdatasync 2.9 ms, the same over zeros
// already written and synced 0.66 ms). A background zeroer therefore keeps
// the active segment written with zeros, and synced, ahead of the data.
const preallocStep = 8 << 20

// preallocator owns the zeroed frontier of the active segment. The flusher
// never writes into a range being zeroed, and the zeroer never zeroes a
// range the flusher has written or reserved.
type preallocator struct {
	s     *Store
	ahead int64 // keep this many zeroed bytes past the data
	kick  chan struct{}

	mu       sync.Mutex
	done     *sync.Cond // on mu: signalled when a zeroing step ends
	seg      *segment   // the active segment
	zeroedTo int64      // file offset up to which zeros are written and synced
	writeEnd int64      // file offset up to which the flusher has written
	busyFrom int64      // range being zeroed, empty when busyFrom == busyTo
	busyTo   int64
}

func newPreallocator(s *Store, ahead int64) *preallocator {
	p := &preallocator{s: s, ahead: ahead, kick: make(chan struct{}, 1)}
	p.done = sync.NewCond(&p.mu)
	return p
}

// reserve is called by the flusher before it writes [from, to) of seg. It
// waits while the zeroer works inside that range and asks it to move ahead
// when the frontier is near.
func (p *preallocator) reserve(seg *segment, from, to int64) {
	p.mu.Lock()
	if p.seg != seg {
		p.seg, p.zeroedTo, p.writeEnd, p.busyFrom, p.busyTo = seg, 0, 0, 0, 0
	}
	p.writeEnd = max(p.writeEnd, to)
	for p.busyFrom < p.busyTo && from < p.busyTo && to > p.busyFrom {
		p.done.Wait()
	}
	need := p.zeroedTo < p.writeEnd+p.ahead/2 && p.zeroedTo < p.s.opts.SegmentSize
	p.mu.Unlock()
	if need {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}

// loop zeroes ahead of the data until the store closes.
func (p *preallocator) loop() {
	zeros := make([]byte, 1<<20)
	for {
		select {
		case <-p.s.quit:
			return
		case <-p.kick:
		}
		for p.step(zeros) {
		}
	}
}

// step zeroes the next range, reporting whether there is more to do.
func (p *preallocator) step(zeros []byte) bool {
	p.mu.Lock()
	seg := p.seg
	from := max(p.zeroedTo, p.writeEnd)
	to := min(p.s.opts.SegmentSize, from+preallocStep)
	if seg == nil || from >= to || p.zeroedTo >= p.writeEnd+p.ahead {
		p.mu.Unlock()
		return false
	}
	p.busyFrom, p.busyTo = from, to
	p.mu.Unlock()

	err := p.zero(seg, from, to, zeros)

	p.mu.Lock()
	p.busyFrom, p.busyTo = 0, 0
	if err == nil && p.seg == seg {
		p.zeroedTo = to
	}
	p.done.Broadcast()
	more := err == nil && p.seg == seg && p.zeroedTo < p.writeEnd+p.ahead && p.zeroedTo < p.s.opts.SegmentSize
	p.mu.Unlock()
	if err != nil {
		// Not fatal: writes past the frontier only cost slower fsyncs.
		p.s.log.Warn("segment preallocation failed", "segment", seg.name, "err", err)
	}
	return more
}

func (p *preallocator) zero(seg *segment, from, to int64, zeros []byte) error {
	for off := from; off < to; {
		n := min(int64(len(zeros)), to-off)
		if _, err := seg.f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("zero %s at %d: %w", seg.name, off, err)
		}
		off += n
	}
	return seg.f.SyncData()
}
