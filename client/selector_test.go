package client

import (
	"fmt"
	"testing"
)

func testQueues(brokers ...string) []MessageQueue {
	var qs []MessageQueue
	for _, b := range brokers {
		for i := range 4 {
			qs = append(qs, MessageQueue{Topic: "T", BrokerName: b, QueueID: int32(i)})
		}
	}
	return qs
}

func TestSelectorRoundRobinCoversAll(t *testing.T) {
	qs := testQueues("a", "b")
	s := NewRoundRobinSelector()
	msg := NewMessage("T", []byte("x"))
	seen := map[MessageQueue]int{}
	for range 3 * len(qs) {
		seen[s.Select(msg, qs, nil)]++
	}
	for _, q := range qs {
		if seen[q] != 3 {
			t.Fatalf("queue %s picked %d times in %d sends, want 3: %v", q, seen[q], 3*len(qs), seen)
		}
	}
}

func TestSelectorHashStable(t *testing.T) {
	qs := testQueues("a", "b")
	// Two selectors stand for two producers, in two processes.
	s1, s2 := NewHashSelector(), NewHashSelector()
	spread := map[MessageQueue]bool{}
	for i := range 100 {
		key := fmt.Sprintf("order-%d", i)
		m := NewMessage("T", []byte("x")).WithShardingKey(key)
		q1 := s1.Select(m, qs, nil)
		if q2 := s2.Select(m, qs, nil); q1 != q2 {
			t.Fatalf("key %s: %s and %s", key, q1, q2)
		}
		if q := s1.Select(NewMessage("T", []byte("y")), qs, key); q != q1 {
			t.Fatalf("key %s as arg: %s, as sharding key: %s", key, q, q1)
		}
		spread[q1] = true
	}
	if len(spread) < len(qs)/2 {
		t.Fatalf("100 keys hashed to only %d of %d queues", len(spread), len(qs))
	}
	// The FNV-1a hash is fixed (value computed independently): this pins
	// the queue across versions and languages.
	if got, want := hashKey("order-1"), uint32(0x2b7fcd6d); got != want {
		t.Fatalf("hashKey(order-1) = %#x, want %#x", got, want)
	}
	// Keys stand in when there is no sharding key.
	m := NewMessage("T", []byte("x")).WithKeys("k1")
	if s1.Select(m, qs, nil) != qs[hashKey("k1")%uint32(len(qs))] {
		t.Fatal("KEYS not used as the hash key")
	}
}

func TestSelectorRandomAndFunc(t *testing.T) {
	qs := testQueues("a")
	s := NewRandomSelector()
	seen := map[MessageQueue]bool{}
	for range 1000 {
		q := s.Select(NewMessage("T", []byte("x")), qs, nil)
		seen[q] = true
	}
	if len(seen) != len(qs) {
		t.Fatalf("random selector picked %d of %d queues in 1000 tries", len(seen), len(qs))
	}
	last := QueueSelectorFunc(func(_ *Message, qs []MessageQueue, arg any) MessageQueue { return qs[arg.(int)] })
	if q := last.Select(nil, qs, 2); q != qs[2] {
		t.Fatalf("func selector: %s", q)
	}
}
