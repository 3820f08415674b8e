//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// DeviceWriteBytes flushes every file system's dirty pages (sync(2)) and
// returns the bytes written so far to the block device that holds path:
// sectors written in /proc/diskstats, times 512. It counts what reached
// the device from anything on the machine, file-system journal included,
// so a figure per run needs a machine otherwise quiet on that device.
//
// A process's write_bytes in /proc/<pid>/io does not do here: it counts
// whole page-cache folios as they are dirtied, and a kernel that caches a
// file in large folios counts up to megabytes for each small append that
// follows an fsync.
func DeviceWriteBytes(path string) (int64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("%w: device of %s: %v", ErrNoProc, path, err)
	}
	major, minor := (st.Dev>>8)&0xfff|(st.Dev>>32)&^0xfff, st.Dev&0xff|(st.Dev>>12)&^0xff
	syscall.Sync()
	b, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNoProc, err)
	}
	return parseDiskstats(b, major, minor)
}

// parseDiskstats finds the line of device major:minor in the text of
// /proc/diskstats and returns its sectors written (the tenth field) in
// bytes.
func parseDiskstats(b []byte, major, minor uint64) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[0] != strconv.FormatUint(major, 10) || f[1] != strconv.FormatUint(minor, 10) {
			continue
		}
		n, err := strconv.ParseInt(f[9], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bench: /proc/diskstats sectors written %q for %d:%d is not a count", f[9], major, minor)
		}
		return n * 512, nil
	}
	return 0, fmt.Errorf("%w: no /proc/diskstats line for device %d:%d", ErrNoProc, major, minor)
}
