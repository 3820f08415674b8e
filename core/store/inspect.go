package store

// FilesystemUsage reports the space of the filesystem holding the store:
// bytes used and in total, as retention's high-water mark sees them.
func (s *Store) FilesystemUsage() (used, total uint64, err error) {
	du, err := s.opts.FS.GetDiskUsage(s.opts.Dir)
	if err != nil {
		return 0, 0, err
	}
	return du.UsedBytes, du.TotalBytes, nil
}
