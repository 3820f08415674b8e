package store_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// TestRefillShortBlocks opens a store whose index holds consume-queue
// blocks cut short, as a checkpoint of older versions could leave them.
// Once the index is marked as checked, the lost units read as holes;
// without that mark, the next start fills the blocks again from the
// commit log and every message reads back.
func TestRefillShortBlocks(t *testing.T) {
	logs := &storetest.LogBuffer{}
	o := store.Options{Dir: t.TempDir(), SegmentSize: 64 << 10, CheckpointInterval: time.Hour, Logger: logs.Logger()}
	s := storetest.Open(t, o)
	// Two queues interleaved, so a block's missing records lie among
	// another queue's, across several segments.
	want := bodies(strings.Repeat("r", 400), 64*5)
	other := bodies(strings.Repeat("o", 300), 64*5)
	for i := 0; i < len(want); i += 8 {
		appendBodies(t, s, "RF", want[i:i+8])
		appendBodies(t, s, "OTHER", other[i:i+8])
	}
	if _, max := s.CommitLogOffsets(); max < 3*o.SegmentSize {
		t.Fatalf("the log ends at %d: fewer than three segments", max)
	}
	shorten := func(keepNote bool) {
		t.Helper()
		for _, c := range []struct {
			topic string
			no    int64
			units int
		}{{"RF", 0, 1}, {"RF", 2, 37}, {"OTHER", 1, 63}} {
			if err := s.ShortenIndexBlock(c.topic, 0, c.no, c.units, keepNote); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = storetest.Open(t, o)
	}

	shorten(true)
	if got := readSkipping(t, s, "RF"); len(got) != len(want)-63-27 {
		t.Fatalf("read %d of %d messages through the short blocks, want %d", len(got), len(want), len(want)-63-27)
	}

	shorten(false)
	defer s.Close()
	if got := storetest.ReadQueue(t, s, "RF", 0, 0); !slices.Equal(got, want) {
		t.Fatalf("RF: read %d messages, want %d", len(got), len(want))
	}
	if got := storetest.ReadQueue(t, s, "OTHER", 0, 0); !slices.Equal(got, other) {
		t.Fatalf("OTHER: read %d messages, want %d", len(got), len(other))
	}
	if !strings.Contains(logs.String(), "short=3 refilled=3 units_restored=91") {
		t.Fatalf("no line telling of three blocks refilled:\n%s", logs.String())
	}
}

// readSkipping reads topic/0 from its start, passing over holes.
func readSkipping(t *testing.T, s *store.Store, topic string) []string {
	t.Helper()
	var got []string
	it := s.NewQueueIter(topic, 0, store.IterOptions{})
	defer it.Close()
	for ok := it.SeekGE(0); ok; ok = it.Next() {
		got = append(got, string(it.Record().Body()))
	}
	if err := it.Error(); err != nil {
		t.Fatal(err)
	}
	return got
}
