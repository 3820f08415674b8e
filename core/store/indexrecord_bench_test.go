package store

import (
	"io"
	"log/slog"
	"testing"

	"github.com/rmq-go/rmq/core/message"
)

// BenchmarkIndexRecord measures what the flusher does per record for the
// key index: find KEYS and UNIQ_KEY among the properties the Go client
// sends, hash each key and add its entries, and write them in rounds of
// 64 records.
func BenchmarkIndexRecord(b *testing.B) {
	s, err := Open(Options{Dir: b.TempDir(), Flush: FlushAsync, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m := &message.Message{Topic: "BenchTopic", Body: make([]byte, 1024), Properties: message.EncodeProperties(map[string]string{
		message.PropertyUniqKey: "7F000001000118B4AAC2476B5BB10000", message.PropertyKeys: "order-1 user-7",
		message.PropertyTags: "TagA", "WAIT": "true", "MIN_OFFSET": "0", "MAX_OFFSET": "12",
	})}
	rec, err := message.AppendRecord(nil, m)
	if err != nil {
		b.Fatal(err)
	}
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	b.ReportAllocs()
	off, n := int64(0), 0
	for b.Loop() {
		s.indexRecord(message.Record(rec), off)
		off += int64(len(rec))
		if n++; n%64 == 0 {
			s.keys.writeLocked(off)
		}
	}
}
