//go:build !linux

package store

import "github.com/cockroachdb/pebble/v2/vfs"

// allocate reports that it did not allocate f's blocks: the caller
// writes zeros.
func allocate(vfs.File, int64) (bool, error) { return false, nil }

// dropCache leaves f's cached pages to the operating system.
func dropCache(vfs.File, int64, int64) error { return nil }
