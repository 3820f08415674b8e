package histogram

import (
	"sync"
	"testing"
)

func TestObserve(t *testing.T) {
	h := New(10, 100, 1000)
	for _, v := range []int64{0, 10, 11, 100, 500, 1000, 1001, 1 << 40} {
		h.Observe(v)
	}
	var s Snapshot
	h.Snapshot(&s)
	want := []uint64{2, 2, 2, 2}
	for i := range want {
		if s.Counts[i] != want[i] {
			t.Fatalf("counts %v, want %v", s.Counts, want)
		}
	}
	if s.Count != 8 || s.Sum != 0+10+11+100+500+1000+1001+1<<40 {
		t.Fatalf("count %d sum %d", s.Count, s.Sum)
	}
}

func TestConcurrent(t *testing.T) {
	h := New(Durations...)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				h.Observe(int64(g * i))
			}
		}()
	}
	wg.Wait()
	var s Snapshot
	h.Snapshot(&s)
	if s.Count != 4000 {
		t.Fatalf("count %d, want 4000", s.Count)
	}
}

func TestPowers(t *testing.T) {
	got := Powers(4, 1024)
	if len(got) != 6 || got[5] != 1024 {
		t.Fatalf("Powers(4, 1024) = %v", got)
	}
}

func BenchmarkObserve(b *testing.B) {
	h := New(Durations...)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.Observe(int64(i) * 1000)
	}
}
