package store

// Dropping the synced log from the page cache.
//
// Every byte the store writes goes through the page cache, and with nothing
// to stop it the cache grows by the write rate until memory runs short. Each
// write then lands in pages the kernel has to find afresh. On a virtual
// machine whose free memory is handed back to the host (virtio-balloon free
// page reporting), the first write to such a page makes the host back it
// again: measured here, appending 170 KiB rounds with an fdatasync after each
// cost 0.23 µs of CPU per KiB while the pages were ones the kernel had just
// freed, and 2.1–2.3 µs per KiB once they were not; under pipelined sends
// the kernel's copy into those pages was a fifth of the broker's CPU. The
// trimmer therefore drops synced log bytes older than CacheWindow from the
// cache, and the next writes reuse the pages freed. It also keeps the log
// from pushing the index's files out of memory. Reads of what was dropped
// go to disk; nothing else changes, since the advice never touches data.

// trimStep is the least the trimmer drops at once, so that the advice's
// fixed cost is spread over many pages.
const trimStep = 8 << 20

// trimmer drops the synced log behind the window from the page cache, on a
// goroutine of its own so that no round waits for it.
type trimmer struct {
	s      *Store
	window int64
	kick   chan struct{}
	to     int64 // log offset below which the cache was dropped; loop's own
}

func newTrimmer(s *Store, window int64) *trimmer {
	return &trimmer{s: s, window: window, kick: make(chan struct{}, 1), to: max(0, s.durable.Load()-window)}
}

// wake asks the trimmer to look at the synced end again. It never blocks.
func (t *trimmer) wake() {
	if t == nil {
		return
	}
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// loop drops what falls behind the window until the store closes.
func (t *trimmer) loop() {
	for {
		select {
		case <-t.s.quit:
			return
		case <-t.kick:
		}
		t.trim()
	}
}

// trim drops the synced log below the window, trimStep at a time, from
// where the last call stopped.
func (t *trimmer) trim() {
	end := t.s.durable.Load() - t.window
	for end-t.to >= trimStep {
		select {
		case <-t.s.quit:
			return
		default:
		}
		to := t.to + trimStep
		if err := t.s.cl.dropCache(t.to, to); err != nil {
			// Advice only: the cache stays as the kernel keeps it.
			t.s.log.Warn("store: dropping the synced log from the page cache failed", "from", t.to, "to", to, "err", err)
		}
		t.to = to
		t.s.stats.CacheDropped.Store(to)
	}
}

// dropCache drops the cached pages of the segments' bytes in [from, to).
func (cl *commitLog) dropCache(from, to int64) error {
	cl.mu.RLock()
	defer cl.mu.RUnlock()
	for _, seg := range cl.segs {
		lo, hi := max(from, seg.base), min(to, seg.base+cl.segSize)
		if lo >= hi {
			continue
		}
		if err := dropCache(seg.f, lo-seg.base, hi-lo); err != nil {
			return err
		}
	}
	return nil
}
