package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Disk space (see doc.go, "Full disk"). The store refuses appends while
// the filesystem has less than DiskReserve bytes free, so its own writes
// never take the last of the disk from the index, and keeps a reserve
// file of DiskReserve bytes that it deletes when the index meets a full
// disk anyway (another process filled it): pebble treats a failed write
// of its log or manifest as fatal, and retries a failed flush without
// pause, which at Open never returns.
const (
	// reserveFile is the reserve file's name in the data directory.
	reserveFile = "RESERVE"
	// diskCheckInterval is how often the free space is measured while
	// nothing else asks for it.
	diskCheckInterval = time.Second
	// diskLogEvery bounds the logs of a full disk: at most one line of
	// each kind per interval.
	diskLogEvery = 10 * time.Second
)

// diskState is the store's view of its filesystem's free space.
type diskState struct {
	on    bool         // DiskReserve > 0 and the filesystem reports its space; set by Open
	full  atomic.Bool  // appends are refused
	avail atomic.Int64 // free bytes at the last measure
	need  atomic.Int64 // free bytes appends need: the reserve, twice it without the reserve file
	// since counts the bytes written since the last measure; the flusher
	// measures again once a quarter of the reserve is written.
	since atomic.Int64

	mu struct {
		sync.Mutex
		reserve    bool      // the reserve file exists
		fullLogged time.Time // last log of the full disk
		logged     bool      // the current full spell was logged
		createErr  time.Time // last log of a failed reserve creation
	}
}

// openDisk measures the disk before the index opens: it decides whether
// the checks run at all, finds the reserve file and sets the full state.
// A filesystem that does not report its space (an in-memory one) turns
// them off.
func (s *Store) openDisk() {
	if s.opts.DiskReserve <= 0 {
		return
	}
	if _, err := s.opts.FS.GetDiskUsage(s.opts.Dir); err != nil {
		s.log.Debug("free-space checks off: the filesystem does not report its space", "err", err)
		return
	}
	s.disk.on = true
	_, err := s.opts.FS.Stat(s.reservePath())
	s.disk.mu.reserve = err == nil
	s.checkDisk(false)
}

func (s *Store) reservePath() string { return s.opts.FS.PathJoin(s.opts.Dir, reserveFile) }

// DiskFull reports whether appends are refused for want of disk space.
func (s *Store) DiskFull() bool { return s.disk.full.Load() }

// diskFullError is the error of an append refused for want of space.
func (s *Store) diskFullError() error {
	need, why := s.disk.need.Load(), "store.diskReserve"
	if need > s.opts.DiskReserve {
		why = "twice store.diskReserve while the reserve file is missing"
	}
	return fmt.Errorf("%w: %s has %d bytes free, less than the %d kept for the index (%s); writes resume once space is freed",
		ErrDiskFull, s.opts.Dir, s.disk.avail.Load(), need, why)
}

// checkDisk measures the free space and sets the full state, logging a
// change at most every diskLogEvery. With create it also makes the
// reserve file when it is missing and twice the reserve is free.
func (s *Store) checkDisk(create bool) {
	if !s.disk.on {
		return
	}
	s.disk.since.Store(0)
	du, err := s.opts.FS.GetDiskUsage(s.opts.Dir)
	if err != nil {
		return // keep the last state
	}
	avail := int64(du.AvailBytes)
	r := s.opts.DiskReserve
	s.disk.mu.Lock()
	defer s.disk.mu.Unlock()
	now := time.Now()
	if create && !s.disk.mu.reserve && avail >= 2*r {
		if err := s.makeReserve(); err != nil {
			if now.Sub(s.disk.mu.createErr) >= diskLogEvery {
				s.disk.mu.createErr = now
				s.log.Warn("could not make the disk reserve file", "path", s.reservePath(), "err", err)
			}
		} else {
			s.disk.mu.reserve = true
			avail -= r
		}
	}
	s.disk.avail.Store(avail)
	// Without its reserve file the store keeps room to make it again, so
	// space the file gave back to the index is not taken by the log.
	need := r
	if !s.disk.mu.reserve {
		need = 2 * r
	}
	s.disk.need.Store(need)
	full := avail < need
	was := s.disk.full.Swap(full)
	switch {
	case full && now.Sub(s.disk.mu.fullLogged) >= diskLogEvery:
		s.disk.mu.fullLogged, s.disk.mu.logged = now, true
		s.log.Error("DISK FULL: sends are refused until space is freed; reads and consumer offsets go on",
			"dir", s.opts.Dir, "free", avail, "need", need, "reserve", r, "reserveFile", s.disk.mu.reserve)
	case full && !was:
		s.disk.mu.logged = false
	case !full && was && s.disk.mu.logged:
		s.disk.mu.logged = false
		s.log.Info("disk has room again: sends are taken", "dir", s.opts.Dir, "free", avail, "need", need, "reserveFile", s.disk.mu.reserve)
	}
}

// wrote counts n bytes written to the log and measures the disk again
// when a quarter of the reserve was written since the last measure, so a
// fast writer stops well before the reserve is gone.
func (s *Store) wrote(n int) {
	if s.disk.on && s.disk.since.Add(int64(n)) >= s.opts.DiskReserve/4 {
		s.checkDisk(false)
	}
}

// makeReserve writes the reserve file: its blocks allocated at once where
// the filesystem can (fallocate), written with zeros where it cannot.
// disk.mu is held.
func (s *Store) makeReserve() (err error) {
	fs, path, size := s.opts.FS, s.reservePath(), s.opts.DiskReserve
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = fs.Remove(path)
		}
	}()
	done, err := allocate(f, size)
	if err != nil {
		return err
	}
	if !done && f.Fd() != vfs.InvalidFd {
		zeros := make([]byte, 1<<20)
		for off := int64(0); off < size; off += int64(len(zeros)) {
			if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), size-off)], off); err != nil {
				return err
			}
		}
	}
	// A file without a descriptor lives in memory (tests): it stays empty.
	if err := f.Sync(); err != nil {
		return err
	}
	return syncDir(fs, s.opts.Dir)
}

// indexDiskFull is called when a write of the index or the key index
// meets a full disk; the write is tried once more when it returns. It
// deletes the reserve file if there is one; otherwise it waits,
// measuring every diskCheckInterval, until the reserve is free again or
// the store closes, so that the retried write can succeed: pebble would
// otherwise stop (a write of its log) or retry at once, forever (a
// flush), and the key index would take no entries until a restart.
func (s *Store) indexDiskFull() {
	s.disk.full.Store(true)
	s.disk.mu.Lock()
	if s.disk.mu.reserve {
		err := s.opts.FS.Remove(s.reservePath())
		if err == nil || errors.Is(err, syscall.ENOENT) {
			s.disk.mu.reserve = false
		}
		s.disk.mu.Unlock()
		s.log.Error("DISK FULL: the index found no space; deleted the reserve file so it can go on. Sends are refused until space is freed",
			"dir", s.opts.Dir, "reserve", s.opts.DiskReserve, "err", err)
		return
	}
	s.disk.mu.Unlock()
	t := time.NewTicker(diskCheckInterval)
	defer t.Stop()
	var logged time.Time
	for {
		du, err := s.opts.FS.GetDiskUsage(s.opts.Dir)
		if err == nil && int64(du.AvailBytes) >= s.opts.DiskReserve {
			return
		}
		if now := time.Now(); now.Sub(logged) >= diskLogEvery {
			logged = now
			s.log.Error("DISK FULL: the index has no space and no reserve file left; its writes wait until space is freed",
				"dir", s.opts.Dir, "free", du.AvailBytes, "reserve", s.opts.DiskReserve)
		}
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
	}
}

// isNoSpace reports whether err says the disk is full.
func isNoSpace(err error) bool { return errors.Is(err, syscall.ENOSPC) }
