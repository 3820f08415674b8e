package store_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// appendBodies appends one message per body to topic/0, 16 per call.
func appendBodies(t *testing.T, s *store.Store, topic string, bodies []string) {
	t.Helper()
	for len(bodies) > 0 {
		n := min(16, len(bodies))
		var batch []*message.Message
		for _, b := range bodies[:n] {
			batch = append(batch, storetest.Msg(topic, 0, b))
		}
		if err := s.Append(batch); err != nil {
			t.Fatal(err)
		}
		bodies = bodies[n:]
	}
}

func bodies(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return out
}

// readInPulls reads topic/0 from 0 the way pulls of 32 do.
func readInPulls(t *testing.T, s *store.Store, topic string) []string {
	t.Helper()
	var got []string
	for from := int64(0); ; {
		it := s.NewQueueIter(topic, 0, store.IterOptions{MaxUnits: 32, StopOnCorruption: true})
		n := 0
		for ok := it.SeekGE(from); ok && n < 32; ok = it.Next() {
			got = append(got, string(it.Record().Body()))
			n++
		}
		if err := it.Error(); err != nil {
			t.Fatal(err)
		}
		it.Close()
		if n == 0 {
			return got
		}
		from += int64(n)
	}
}

// TestReadAheadServesBacklog reads a queue's backlog in pulls of 32: the
// blocks after the first one read from the index are then held in memory,
// and every message comes back in order. A topic deleted and created
// again is then read: the blocks kept for its old queue are not served.
func TestReadAheadServesBacklog(t *testing.T) {
	s := storetest.Open(t, store.Options{Dir: t.TempDir(), Logger: quietLogger()})
	defer s.Close()
	old := bodies("old", 64*20)
	appendBodies(t, s, "RA", old)
	if got := readInPulls(t, s, "RA"); !slices.Equal(got, old) {
		t.Fatalf("read %d messages, want %d (first %q)", len(got), len(old), got[:min(3, len(got))])
	}
	// Block 17 was read ahead with block 16 (64 × 20 messages: blocks 0
	// to 17 are in the index, 18 and 19 in memory).
	if !s.ReadAheadHolds("RA", 0, 17) {
		t.Fatal("block 17 is not held after a read from block 16")
	}
	if err := s.DeleteTopic("RA"); err != nil {
		t.Fatal(err)
	}
	fresh := bodies("new", 64*20)
	appendBodies(t, s, "RA", fresh)
	// First where the old queue's blocks were held.
	it := s.NewQueueIter("RA", 0, store.IterOptions{MaxUnits: 32, StopOnCorruption: true})
	if !it.SeekGE(64 * 17) {
		t.Fatalf("offset %d after delete: %v", 64*17, it.Error())
	}
	if got := string(it.Record().Body()); got != fresh[64*17] {
		t.Fatalf("offset %d after delete: %q, want %q", 64*17, got, fresh[64*17])
	}
	it.Close()
	if got := readInPulls(t, s, "RA"); !slices.Equal(got, fresh) {
		t.Fatalf("after delete: read %d messages, want %d (first %q)", len(got), len(fresh), got[:min(3, len(got))])
	}
}
