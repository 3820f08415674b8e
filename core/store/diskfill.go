package store

import "fmt"

// DiskFill returns the fraction of the data directory's filesystem in
// use, read now, and Options.DiskHighWater, above which retention deletes
// the oldest segments before their time (zero or negative: never).
func (s *Store) DiskFill() (used, highWater float64, err error) {
	highWater = s.opts.DiskHighWater
	du, err := s.opts.FS.GetDiskUsage(s.opts.Dir)
	if err != nil {
		return 0, highWater, err
	}
	if du.TotalBytes == 0 {
		return 0, highWater, fmt.Errorf("store: the filesystem of %s reports no size", s.opts.Dir)
	}
	return float64(du.UsedBytes) / float64(du.TotalBytes), highWater, nil
}
