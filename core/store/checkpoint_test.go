package store_test

import (
	"slices"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// TestCheckpointKeepsCompletedBlocks completes a consume-queue block
// while a checkpoint that copied it partial is still under way, then
// moves the block out of memory and reads the queue from its start. The
// checkpoint's copy must not put the block's earlier state over the whole
// one: the units added since would read as holes.
func TestCheckpointKeepsCompletedBlocks(t *testing.T) {
	s := storetest.Open(t, store.Options{Dir: t.TempDir(), CheckpointInterval: time.Hour, Logger: quietLogger()})
	defer s.Close()
	want := bodies("m", 64*4)
	appendBodies(t, s, "CK", want[:64+10]) // block 1 open with 10 units
	ran := 0
	s.OnCheckpointUnlocked(func() {
		if ran++; ran == 1 {
			// Block 1 completes, and blocks 2 and 3 follow, so block 1
			// is read back from the index.
			appendBodies(t, s, "CK", want[64+10:])
		}
	})
	if err := s.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if ran != 1 {
		t.Fatalf("the checkpoint hook ran %d times", ran)
	}
	if got := readInPulls(t, s, "CK"); !slices.Equal(got, want) {
		t.Fatalf("read %d messages, want %d", len(got), len(want))
	}
}
