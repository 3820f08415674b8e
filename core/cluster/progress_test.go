package cluster_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/cluster"
	"github.com/rmq-go/rmq/core/store"
)

// TestCommittedOffsetsSurviveLeaderLoss commits offsets on the leader
// and stops it at once, before any checkpoint could propose them: the
// new leader has every one. A follower refuses offset commits.
func TestCommittedOffsetsSurviveLeaderLoss(t *testing.T) {
	s := newSet(t, 3, func(o *cluster.Options) { o.Store.CheckpointInterval = time.Hour })
	l := s.leader(nil)
	st := l.node.Store()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if err := st.CommitOffsetSync(fmt.Sprint("g", g), "T", int32(i%4), int64(i+1)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, m := range s.members {
		if m == l {
			continue
		}
		if err := m.node.Store().CommitOffset("g0", "T", 0, 1000); !errors.Is(err, store.ErrNotLeader) {
			t.Fatalf("an offset commit on follower %s: %v", m.opts.NodeID, err)
		}
	}
	s.stop(l)
	nl := s.leader(l)
	for g := range 8 {
		for q := range int32(4) {
			want := int64(49-(49-q)%4) + 1 // the last i with i%4 == q, plus one
			if off, ok := nl.node.Store().ConsumerOffset(fmt.Sprint("g", g), "T", q); !ok || off != want {
				t.Fatalf("group g%d queue %d on the new leader: %d %v, want %d", g, q, off, ok, want)
			}
		}
	}
}
