package apacheimport

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The files ReadDir reads, as Apache names them under
// ${storePathRootDir}/config.
const (
	TopicsFile       = "topics.json"
	GroupsFile       = "subscriptionGroup.json"
	OffsetsFile      = "consumerOffset.json"
	DelayOffsetsFile = "delayOffset.json"
)

// Source is what was read from an Apache broker: each part nil when its
// file was not there.
type Source struct {
	Dir          string // the config directory read
	Topics       *Topics
	Groups       *Groups
	Offsets      *Offsets
	DelayOffsets *DelayOffsets
	// BrokerConf is broker.conf's entries, nil without one.
	BrokerConf []Property
	// Notes say which files were missing, or read from a .bak copy.
	Notes []string
}

// ReadDir reads the config directory of an Apache broker, or its store
// root holding config/. A missing file is noted and skipped (a broker
// whose consumers never committed has no consumerOffset.json); a file
// that is missing or empty but has the .bak copy Apache keeps is read
// from that copy, as Apache's ConfigManager does. A file that cannot be
// read or decoded is an error: nothing of the directory is returned, so
// nothing is half-imported. brokerConf, when not "", is a broker.conf
// to read too.
func ReadDir(dir, brokerConf string) (*Source, error) {
	if _, err := os.Stat(filepath.Join(dir, TopicsFile)); errors.Is(err, fs.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, "config", TopicsFile)); err == nil {
			dir = filepath.Join(dir, "config")
		}
	}
	src := &Source{Dir: dir}
	found := 0
	read := func(name string, decode func([]byte) error) error {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if (err == nil && len(b) == 0) || errors.Is(err, fs.ErrNotExist) {
			if bak, berr := os.ReadFile(path + ".bak"); berr == nil && len(bak) > 0 {
				src.Notes = append(src.Notes, fmt.Sprintf("%s: missing or empty, read %s.bak", name, name))
				b, err = bak, nil
				path += ".bak"
			}
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			src.Notes = append(src.Notes, fmt.Sprintf("%s: not found, nothing imported from it", name))
			return nil
		case err != nil:
			return err
		case len(b) == 0:
			src.Notes = append(src.Notes, fmt.Sprintf("%s: empty, nothing imported from it", name))
			return nil
		}
		found++
		if err := decode(b); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	err := errors.Join(
		read(TopicsFile, func(b []byte) (err error) { src.Topics, err = DecodeTopics(b); return }),
		read(GroupsFile, func(b []byte) (err error) { src.Groups, err = DecodeGroups(b); return }),
		read(OffsetsFile, func(b []byte) (err error) { src.Offsets, err = DecodeOffsets(b); return }),
		read(DelayOffsetsFile, func(b []byte) (err error) { src.DelayOffsets, err = DecodeDelayOffsets(b); return }),
	)
	if brokerConf != "" {
		b, rerr := os.ReadFile(brokerConf)
		if rerr == nil {
			src.BrokerConf, rerr = DecodeProperties(b)
			if rerr != nil {
				rerr = fmt.Errorf("%s: %w", brokerConf, rerr)
			}
		}
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return nil, err
	}
	if found == 0 {
		return nil, fmt.Errorf("%w in %s (want %s, %s, %s or %s)", ErrNoInput, dir, TopicsFile, GroupsFile, OffsetsFile, DelayOffsetsFile)
	}
	return src, nil
}
