package cluster

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/rmq-go/rmq/core/store"
)

// An install of a leader's snapshot is made crash-safe by a marker file,
// raft/installing. raft keeps the stream it receives in its snapshot
// store and, once that is complete, counts everything up to the
// snapshot as applied, on this run and every later start, whether or not
// the store got to replace itself with it. So the marker is written
// (and synced) before raft's copy of a full stream is committed, and
// removed once the store is the snapshot's. A start that finds it
// restores the store from the newest snapshot raft kept before anything
// else opens the store: a member never serves, or stands for election,
// with a store older than what raft counts applied.
const installMarker = "installing"

// Create wraps raft's sink so that a full stream, which only an install
// writes (a member's own snapshots are manifests), sets the marker before
// the snapshot is committed.
func (s snapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.FileSnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &installSink{SnapshotSink: sink, dir: s.n.opts.Dir}, nil
}

// installSink is raft's sink, watching the first bytes written for the
// stream's form.
type installSink struct {
	raft.SnapshotSink
	dir  string
	head []byte // the first bytes written, up to what tells the form
}

func (s *installSink) Write(p []byte) (int, error) {
	if need := headLen - len(s.head); need > 0 {
		s.head = append(s.head, p[:min(need, len(p))]...)
	}
	return s.SnapshotSink.Write(p)
}

// headLen is how many bytes tell a manifest from a full stream.
const headLen = 32

func (s *installSink) Close() error {
	manifest, err := store.IsManifest(bufio.NewReader(bytes.NewReader(s.head)))
	if err == nil && !manifest {
		if err := writeSynced(filepath.Join(s.dir, installMarker)); err != nil {
			s.SnapshotSink.Cancel()
			return fmt.Errorf("cluster: marking a snapshot install: %w", err)
		}
	}
	return s.SnapshotSink.Close()
}

// writeSynced creates an empty file and syncs it and its directory.
func writeSynced(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := errors.Join(f.Sync(), f.Close()); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// installDone removes the marker once the store is the snapshot's.
func (n *Node) installDone() error {
	err := os.Remove(filepath.Join(n.opts.Dir, installMarker))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(n.opts.Dir)
}

// finishInstall restores the store from the newest snapshot raft kept
// when an install was cut short (the marker is there), before the store
// is opened.
func (n *Node) finishInstall(files *raft.FileSnapshotStore, so store.Options) error {
	if _, err := os.Stat(filepath.Join(n.opts.Dir, installMarker)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	snaps, err := files.List()
	if err != nil {
		return err
	}
	if len(snaps) == 0 {
		return errors.New("cluster: a snapshot install was cut short and raft kept no snapshot to finish it from")
	}
	meta, rc, err := files.Open(snaps[0].ID)
	if err != nil {
		return err
	}
	defer rc.Close()
	br := bufio.NewReader(rc)
	if manifest, err := store.IsManifest(br); err != nil || manifest {
		return fmt.Errorf("cluster: a snapshot install was cut short and the newest snapshot, %s, is not one received (%v)", meta.ID, err)
	}
	n.log.Warn("a snapshot install was cut short: restoring the store from the snapshot raft kept", "snapshot", meta.ID, "index", meta.Index)
	if err := store.RestoreDir(so.FS, so.Dir, br); err != nil {
		return fmt.Errorf("cluster: finishing a snapshot install: %w", err)
	}
	n.restores.Add(1)
	return n.installDone()
}
