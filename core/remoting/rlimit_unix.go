//go:build unix

package remoting

import "syscall"

// fileLimit returns the process's soft limit on open files, or 0 if it is
// unknown or unlimited.
func fileLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > 1<<30 {
		return 0
	}
	return int(rl.Cur)
}
