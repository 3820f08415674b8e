package store

import (
	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// allocate gives f size bytes of allocated disk blocks, its size
// included, without writing them, where the file has a descriptor and
// its filesystem takes fallocate. It reports whether it did.
func allocate(f vfs.File, size int64) (bool, error) {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return false, nil
	}
	switch err := unix.Fallocate(int(fd), 0, 0, size); err {
	case nil:
		return true, nil
	case unix.EOPNOTSUPP, unix.ENOSYS:
		return false, nil
	default:
		return false, err
	}
}

// dropCache asks the kernel to drop f's cached pages in [off, off+n). The
// pages must be synced: dirty ones are only queued for writeback. A file
// without a descriptor is left as it is.
func dropCache(f vfs.File, off, n int64) error {
	fd := f.Fd()
	if fd == vfs.InvalidFd {
		return nil
	}
	return unix.Fadvise(int(fd), off, n, unix.FADV_DONTNEED)
}
