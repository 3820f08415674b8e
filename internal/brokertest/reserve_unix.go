//go:build unix

package brokertest

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// reservePort takes an exclusive lock on a file named for port in a
// directory every test process shares, and keeps it until the process
// exits (the kernel drops the lock then, however the process ends). It
// reports false when another process holds the lock. Without a usable
// directory it reserves nothing and reports true.
func reservePort(port int) bool {
	dir := filepath.Join(os.TempDir(), "rmq-go-test-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return true
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return err != syscall.EWOULDBLOCK
	}
	reserved = append(reserved, f) // held open: the lock lasts while the process does
	return true
}

// reserved keeps the lock files open; guarded by stable's lock.
var reserved []*os.File
