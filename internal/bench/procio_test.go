//go:build linux

package bench

import (
	"errors"
	"testing"
)

func TestParseDiskstats(t *testing.T) {
	stats := []byte(" 254       0 vda 1577844 124556 33536946 1452185 6816828 1034975 195756688 1228269 0 587384\n" +
		" 253       0 zram0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
	n, err := parseDiskstats(stats, 254, 0)
	if err != nil || n != 195756688*512 {
		t.Fatalf("got %d, %v; want %d", n, err, 195756688*512)
	}
	if _, err := parseDiskstats(stats, 8, 0); !errors.Is(err, ErrNoProc) {
		t.Errorf("a device not listed: %v", err)
	}
	if _, err := parseDiskstats([]byte("254 0 vda 1 2 3 4 5 6 x 8\n"), 254, 0); err == nil {
		t.Error("a bad count: no error")
	}
	if n, err := DeviceWriteBytes(t.TempDir()); err != nil && !errors.Is(err, ErrNoProc) || n < 0 {
		t.Errorf("the temporary directory's device: %d, %v", n, err)
	}
}
