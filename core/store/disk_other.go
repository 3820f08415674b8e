//go:build !linux

package store

import "github.com/cockroachdb/pebble/v2/vfs"

// allocate reports that it did not allocate f's blocks: the caller
// writes zeros.
func allocate(vfs.File, int64) (bool, error) { return false, nil }
