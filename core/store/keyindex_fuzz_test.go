package store_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// FuzzKeyIndex indexes records with arbitrary topics, KEYS and UNIQ_KEY
// values and checks that every key within the bounds finds its record by
// exactly its own topic and key, and that a neighbouring topic/key split
// of the same bytes does not.
func FuzzKeyIndex(f *testing.F) {
	f.Add("T", "a b  c", "U1")
	f.Add("ab", "c", "")
	f.Add("a", "bc \x00 \xff", "\x00")
	f.Add("t", strings.Repeat("k ", 40), strings.Repeat("u", 200))
	// Each input appends to and queries a real store. A fresh, small one
	// every storeInputs inputs keeps the cost of an input from growing
	// with the run (a store that only grows slows each append and query).
	const storeInputs = 256
	open := func(tb testing.TB) *store.Store {
		return storetest.Open(tb, store.Options{Dir: "/d", FS: vfs.NewMem(), Flush: store.FlushAsync,
			IndexMemTableSize: 1 << 20, Logger: quietLogger()})
	}
	s, inputs := open(f), 0
	defer func() { s.Close() }()
	f.Fuzz(func(t *testing.T, topic, keys, uniq string) {
		if inputs++; inputs%storeInputs == 0 {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(t)
		}
		if topic == "" || len(topic) > message.MaxTopicLen || strings.ContainsRune(topic, 0) {
			return
		}
		m := keyed(topic, "b", keys, uniq)
		if len(m.Properties) > message.MaxPropertiesLen || strings.ContainsAny(keys+uniq, "\x01\x02") {
			return // not a message a client can send (the properties' separators)
		}
		if err := s.Append([]*message.Message{m}); err != nil {
			t.Fatal(err)
		}
		off := m.CommitLogOffset
		n := 0
		for _, k := range strings.Split(keys, " ") {
			if k == "" {
				continue
			}
			if n++; n > store.MaxIndexKeysPerMessage {
				break
			}
			got, err := s.QueryByKey(topic, k, false, 0, 1<<62, store.MaxQueryResults)
			if err != nil {
				t.Fatal(err)
			}
			// The newest record comes first: this one, when indexed.
			if want := len(k) <= store.MaxIndexKeyLen; (len(got) > 0 && got[0] == off) != want {
				t.Fatalf("%q/%q: found %v, want %v", topic, k, !want, want)
			}
			if len(topic) > 1 {
				// The topic's last byte moved into the key.
				other, _ := s.QueryByKey(topic[:len(topic)-1], topic[len(topic)-1:]+k, false, 0, 1<<62, store.MaxQueryResults)
				if slices.Contains(other, off) {
					t.Fatalf("%q/%q found as %q/%q", topic, k, topic[:len(topic)-1], topic[len(topic)-1:]+k)
				}
			}
		}
		if uniq != "" && len(uniq) <= store.MaxIndexKeyLen {
			got, err := s.QueryByKey(topic, uniq, true, 0, 1<<62, store.MaxQueryResults)
			if err != nil || len(got) == 0 || got[0] != off {
				t.Fatalf("unique %q/%q not found: %v", topic, uniq, err)
			}
		}
	})
}
