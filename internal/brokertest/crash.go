package brokertest

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/store"
)

// CheckAcknowledgedSurvive opens the store in dir on fs, a crash clone of
// a broker's file system, and fails t unless every body in acked is
// stored in one of topic's first queues, read by queue offset.
func CheckAcknowledgedSurvive(t testing.TB, fs vfs.FS, dir, topic string, queues int32, acked []string) {
	t.Helper()
	levels, _ := broker.ParseDelayLevels(broker.DefaultDelayLevels)
	st, err := store.Open(store.Options{Dir: dir, FS: fs, SegmentSize: 4 << 20, TagCode: broker.TagCode(levels), Logger: Logger()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stored := map[string]bool{}
	for q := range queues {
		it := st.NewQueueIter(topic, q, store.IterOptions{})
		for ok := it.SeekGE(0); ok; ok = it.Next() {
			stored[string(it.Record().Body())] = true
		}
		if err := it.Error(); err != nil {
			t.Fatal(err)
		}
		it.Close()
	}
	lost := 0
	for _, b := range acked {
		if !stored[b] {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged messages lost in the crash (%d stored)", lost, len(acked), len(stored))
	}
	t.Logf("%d acknowledged before the crash, %d stored after it", len(acked), len(stored))
}
