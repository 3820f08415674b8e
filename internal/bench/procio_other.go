//go:build !linux

package bench

// DeviceWriteBytes needs /proc/diskstats; elsewhere it reports ErrNoProc.
func DeviceWriteBytes(path string) (int64, error) { return 0, ErrNoProc }
