package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// ProcessWriteBytes returns the bytes process pid has caused to be
// written to storage since it started: write_bytes in /proc/<pid>/io,
// counted when the process dirties page cache or writes directly, so it
// includes what is still waiting for writeback and excludes writes to
// tmpfs. Reading another user's process needs privileges.
func ProcessWriteBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, fmt.Errorf("%w: I/O of pid %d: %v", ErrNoProc, pid, err)
	}
	return parseProcIO(b)
}

// parseProcIO finds write_bytes in the text of /proc/<pid>/io.
func parseProcIO(b []byte) (int64, error) {
	for line := range bytes.Lines(b) {
		v, ok := bytes.CutPrefix(line, []byte("write_bytes:"))
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bench: /proc io write_bytes %q is not a byte count", bytes.TrimSpace(v))
		}
		return n, nil
	}
	return 0, fmt.Errorf("bench: /proc io without write_bytes")
}
