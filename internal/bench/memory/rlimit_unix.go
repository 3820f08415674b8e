//go:build unix

package memory

import (
	"fmt"
	"syscall"
)

// raiseFileLimit makes this process's soft limit on open files at least
// n, up to its hard limit, and reports an error if that is not enough.
// The broker, started after, inherits the raised limit.
func raiseFileLimit(n int) error {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("%w: open files limit: %v", ErrProbe, err)
	}
	if rl.Cur >= uint64(n) {
		return nil
	}
	if rl.Max < uint64(n) {
		return fmt.Errorf("%w: %d open files needed, the hard limit is %d (ulimit -Hn)", ErrProbe, n, rl.Max)
	}
	rl.Cur = uint64(n)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return fmt.Errorf("%w: raising the open files limit to %d: %v", ErrProbe, n, err)
	}
	return nil
}
