package client

import (
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// pqMsgs returns one message per offset with a body of offset%7+1 bytes,
// so size accounting sees different lengths.
func pqMsgs(offsets ...int64) []*MessageExt {
	out := make([]*MessageExt, len(offsets))
	for i, o := range offsets {
		out[i] = &MessageExt{QueueOffset: o, Message: Message{Topic: "T", Body: make([]byte, o%7+1)}}
	}
	return out
}

func pqBodyBytes(offsets ...int64) int64 {
	var n int64
	for _, o := range offsets {
		n += o%7 + 1
	}
	return n
}

func pqOffsets(msgs []*MessageExt) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.QueueOffset
	}
	return out
}

// pqCached lists the offsets waiting to be consumed, in order.
func pqCached(pq *processQueue) []int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	out := []int64{}
	for _, e := range pq.mu.msgs {
		out = append(out, e.offset)
	}
	return out
}

var pqT0 = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// TestProcessQueueRemoveCommitOffset runs scripts of puts and removes and
// checks the offset each remove says is safe to commit.
func TestProcessQueueRemoveCommitOffset(t *testing.T) {
	type step struct {
		op   string // put, remove, check
		offs []int64
		want int64 // put: 1 if dispatch; remove: the commit offset
		// check: count, size and span after the step
		count int
		size  int64
		span  int64
	}
	put := func(want int64, offs ...int64) step { return step{op: "put", offs: offs, want: want} }
	rm := func(want int64, offs ...int64) step { return step{op: "remove", offs: offs, want: want} }
	check := func(count int, size, span int64) step {
		return step{op: "check", count: count, size: size, span: span}
	}
	cases := []struct {
		name  string
		steps []step
	}{
		{"nothing put", []step{rm(-1, 5), rm(-1), check(0, 0, 0)}},
		{"in order", []step{
			put(1, 0, 1, 2, 3, 4), check(5, pqBodyBytes(0, 1, 2, 3, 4), 4),
			rm(1, 0), rm(2, 1), rm(3, 2), rm(4, 3), rm(5, 4), check(0, 0, 0),
		}},
		{"out of order completion", []step{
			put(1, 10, 11, 12, 13, 14),
			rm(10, 12), rm(10, 14), check(3, pqBodyBytes(10, 11, 13), 3),
			rm(11, 10), rm(13, 11), rm(15, 13), check(0, 0, 0),
		}},
		{"batch removal keeps smallest", []step{
			put(1, 0, 1, 2, 3, 4, 5), rm(1, 0, 2, 4), check(3, pqBodyBytes(1, 3, 5), 4),
			rm(5, 3, 1), rm(6, 5),
		}},
		{"duplicate puts ignored", []step{
			put(1, 0, 1, 1, 2), check(3, pqBodyBytes(0, 1, 2), 2),
			put(0, 1, 2), check(3, pqBodyBytes(0, 1, 2), 2),
			rm(1, 0), put(0, 1), check(2, pqBodyBytes(1, 2), 1),
		}},
		{"duplicate removes counted once", []step{
			put(1, 0, 1, 2), rm(1, 0, 0), check(2, pqBodyBytes(1, 2), 1),
			rm(1, 0), check(2, pqBodyBytes(1, 2), 1),
		}},
		{"unknown offsets ignored", []step{
			put(1, 10, 11), rm(10, 99, 3), check(2, pqBodyBytes(10, 11), 1),
			rm(12, 10, 11), rm(12, 10, 42), check(0, 0, 0),
		}},
		{"out of order puts", []step{
			put(1, 5, 3, 4), check(3, pqBodyBytes(3, 4, 5), 2),
			rm(4, 3), put(0, 1), check(3, pqBodyBytes(1, 4, 5), 4), rm(4, 1),
		}},
		{"max is the largest put, not the last", []step{
			put(1, 8, 9), put(0, 2), rm(10, 8, 9, 2),
		}},
		{"refill after drain", []step{
			put(1, 0), rm(1, 0), put(0, 1, 2), rm(2, 1), rm(3, 2),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pq := newProcessQueue(false, pqT0)
			for i, s := range tc.steps {
				switch s.op {
				case "put":
					got := pq.put(pqMsgs(s.offs...))
					if got != (s.want == 1) {
						t.Fatalf("step %d put %v: dispatch %v", i, s.offs, got)
					}
				case "remove":
					if got := pq.remove(pqMsgs(s.offs...)); got != s.want {
						t.Fatalf("step %d remove %v: commit offset %d, want %d", i, s.offs, got, s.want)
					}
				case "check":
					if c, sz, sp := pq.count(), pq.size(), pq.span(); c != s.count || sz != s.size || sp != s.span {
						t.Fatalf("step %d: count %d size %d span %d, want %d %d %d", i, c, sz, sp, s.count, s.size, s.span)
					}
				}
			}
		})
	}
}

// TestProcessQueueRemoveModel compares random puts and removes of 1000
// messages with a plain map.
func TestProcessQueueRemoveModel(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pq := newProcessQueue(false, pqT0)
	model := map[int64]bool{}
	maxPut := int64(-1)
	var next int64
	for round := range 400 {
		// Pull a batch, sometimes re-delivering a few old offsets.
		var offs []int64
		for range r.IntN(8) {
			offs = append(offs, next)
			next++
		}
		if next > 0 && r.IntN(4) == 0 {
			offs = append(offs, r.Int64N(next))
		}
		for _, o := range offs {
			model[o] = true
			maxPut = max(maxPut, o)
		}
		pq.put(pqMsgs(offs...))
		// Complete a random subset, unknown offsets included.
		var done []int64
		for o := range model {
			if r.IntN(3) == 0 {
				done = append(done, o)
			}
		}
		done = append(done, next+100)
		for _, o := range done {
			delete(model, o)
		}
		got := pq.remove(pqMsgs(done...))
		want := maxPut + 1
		if len(model) > 0 {
			want = slices.Min(slices.Collect(maps.Keys(model)))
		}
		if maxPut < 0 {
			want = -1
		}
		if got != want {
			t.Fatalf("round %d: commit offset %d, want %d", round, got, want)
		}
		if pq.count() != len(model) {
			t.Fatalf("round %d: count %d, want %d", round, pq.count(), len(model))
		}
		if !slices.IsSorted(pqCached(pq)) {
			t.Fatalf("round %d: cache out of order: %v", round, pqCached(pq))
		}
	}
	if next < 1000 {
		t.Fatalf("model saw only %d offsets", next)
	}
}

func TestProcessQueueRemoveStampsConsumeTime(t *testing.T) {
	pq := newProcessQueue(false, pqT0)
	pq.clock = func() time.Time { return pqT0.Add(time.Minute) }
	pq.put(pqMsgs(0))
	pq.remove(pqMsgs(0))
	if got := pq.lastConsumed(); !got.Equal(pqT0.Add(time.Minute)) {
		t.Fatalf("last consumed %v", got)
	}
}

func TestProcessQueueSpanTooLarge(t *testing.T) {
	pq := newProcessQueue(false, pqT0)
	pq.put(pqMsgs(100, 2100))
	if pq.span() != 2000 || pq.spanTooLarge(2000) {
		t.Fatalf("span %d too large at 2000", pq.span())
	}
	pq.put(pqMsgs(2101))
	if !pq.spanTooLarge(2000) {
		t.Fatalf("span %d not too large", pq.span())
	}
}

// sendBackRecorder is a sendBack that records what it was given and fails while
// fail is set.
type sendBackRecorder struct {
	sent   []int64
	fail   error
	during func(m *MessageExt)
}

func (r *sendBackRecorder) sendBack(m *MessageExt) error {
	r.sent = append(r.sent, m.QueueOffset)
	if r.during != nil {
		r.during(m)
	}
	return r.fail
}

func TestProcessQueueCleanExpired(t *testing.T) {
	const timeout = 15 * time.Minute
	start := pqT0
	fresh := func(msgs []*MessageExt) *processQueue {
		pq := newProcessQueue(false, pqT0)
		pq.put(msgs)
		return pq
	}

	t.Run("boundary", func(t *testing.T) {
		msgs := pqMsgs(0, 1)
		pq := fresh(msgs)
		pq.markConsuming(msgs, start)
		var r sendBackRecorder
		if c, err := pq.cleanExpired(start.Add(timeout), timeout, r.sendBack); c != -1 || err != nil || len(r.sent) != 0 {
			t.Fatalf("at exactly the timeout: commit %d err %v sent %v", c, err, r.sent)
		}
		c, err := pq.cleanExpired(start.Add(timeout+time.Millisecond), timeout, r.sendBack)
		if err != nil || c != 2 || !slices.Equal(r.sent, []int64{0, 1}) || pq.count() != 0 {
			t.Fatalf("past the timeout: commit %d err %v sent %v count %d", c, err, r.sent, pq.count())
		}
	})

	t.Run("not started is never expired", func(t *testing.T) {
		pq := fresh(pqMsgs(0, 1))
		var r sendBackRecorder
		if c, _ := pq.cleanExpired(start.Add(24*time.Hour), timeout, r.sendBack); c != -1 || len(r.sent) != 0 {
			t.Fatalf("commit %d sent %v", c, r.sent)
		}
	})

	t.Run("stops at the first unexpired", func(t *testing.T) {
		msgs := pqMsgs(0, 1, 2, 3)
		pq := fresh(msgs)
		pq.markConsuming(msgs[:1], start)
		pq.markConsuming(msgs[1:2], start.Add(10*time.Minute))
		pq.markConsuming(msgs[2:], start)
		var r sendBackRecorder
		c, err := pq.cleanExpired(start.Add(20*time.Minute), timeout, r.sendBack)
		if err != nil || c != 1 || !slices.Equal(r.sent, []int64{0}) || pq.count() != 3 {
			t.Fatalf("commit %d err %v sent %v count %d", c, err, r.sent, pq.count())
		}
	})

	t.Run("at most 16 per sweep", func(t *testing.T) {
		var offs []int64
		for o := range int64(20) {
			offs = append(offs, o)
		}
		msgs := pqMsgs(offs...)
		pq := fresh(msgs)
		pq.markConsuming(msgs, start)
		var r sendBackRecorder
		c, err := pq.cleanExpired(start.Add(time.Hour), timeout, r.sendBack)
		if err != nil || c != 16 || !slices.Equal(r.sent, offs[:16]) || pq.count() != 4 {
			t.Fatalf("commit %d err %v sent %v count %d", c, err, r.sent, pq.count())
		}
	})

	t.Run("send back fails", func(t *testing.T) {
		msgs := pqMsgs(0, 1)
		pq := fresh(msgs)
		pq.markConsuming(msgs, start)
		boom := errors.New("boom")
		r := sendBackRecorder{fail: boom}
		c, err := pq.cleanExpired(start.Add(time.Hour), timeout, r.sendBack)
		if !errors.Is(err, boom) || c != -1 || !slices.Equal(r.sent, []int64{0}) || pq.count() != 2 {
			t.Fatalf("commit %d err %v sent %v count %d", c, err, r.sent, pq.count())
		}
		// The next sweep retries the same message.
		r.fail = nil
		c, err = pq.cleanExpired(start.Add(time.Hour), timeout, r.sendBack)
		if err != nil || c != 2 || !slices.Equal(r.sent, []int64{0, 0, 1}) || pq.count() != 0 {
			t.Fatalf("retry: commit %d err %v sent %v count %d", c, err, r.sent, pq.count())
		}
	})

	t.Run("consumed during send back", func(t *testing.T) {
		msgs := pqMsgs(0, 1, 2)
		pq := fresh(msgs)
		pq.markConsuming(msgs[:2], start)
		var r sendBackRecorder
		r.during = func(m *MessageExt) {
			if m.QueueOffset == 0 {
				if got := pq.remove([]*MessageExt{m}); got != 1 {
					t.Errorf("consume service remove: %d", got)
				}
			}
		}
		c, err := pq.cleanExpired(start.Add(time.Hour), timeout, r.sendBack)
		if err != nil || c != 2 || !slices.Equal(r.sent, []int64{0, 1}) {
			t.Fatalf("commit %d err %v sent %v", c, err, r.sent)
		}
		if pq.count() != 1 || pq.size() != pqBodyBytes(2) || !slices.Equal(pqCached(pq), []int64{2}) {
			t.Fatalf("count %d size %d cached %v", pq.count(), pq.size(), pqCached(pq))
		}
	})

	t.Run("same offset pulled again during send back", func(t *testing.T) {
		msgs := pqMsgs(0, 1)
		pq := fresh(msgs)
		pq.markConsuming(msgs, start)
		again := pqMsgs(0)
		var r sendBackRecorder
		r.during = func(m *MessageExt) {
			if m == msgs[0] {
				pq.remove(msgs[:1])
				pq.put(again) // a seek back re-delivered offset 0
			}
		}
		_, err := pq.cleanExpired(start.Add(time.Hour), timeout, r.sendBack)
		if err != nil || !slices.Equal(r.sent, []int64{0}) {
			t.Fatalf("err %v sent %v", err, r.sent)
		}
		if !slices.Equal(pqCached(pq), []int64{0, 1}) || pq.count() != 2 {
			t.Fatalf("the re-delivered message was removed: cached %v count %d", pqCached(pq), pq.count())
		}
	})

	t.Run("orderly skipped", func(t *testing.T) {
		msgs := pqMsgs(0)
		pq := newProcessQueue(true, pqT0)
		pq.put(msgs)
		pq.markConsuming(msgs, start)
		var r sendBackRecorder
		if c, err := pq.cleanExpired(start.Add(time.Hour), timeout, r.sendBack); c != -1 || err != nil || len(r.sent) != 0 {
			t.Fatalf("commit %d err %v sent %v", c, err, r.sent)
		}
	})
}

func TestProcessQueueOrderly(t *testing.T) {
	t.Run("take and commit", func(t *testing.T) {
		pq := newProcessQueue(true, pqT0)
		if !pq.put(pqMsgs(0, 1, 2)) {
			t.Fatal("first put did not dispatch")
		}
		if pq.put(pqMsgs(3)) {
			t.Fatal("put dispatched while a dispatch is in progress")
		}
		if got := pqOffsets(pq.takeMessages(2)); !slices.Equal(got, []int64{0, 1}) {
			t.Fatalf("took %v", got)
		}
		if pq.count() != 4 || pq.size() != pqBodyBytes(0, 1, 2, 3) || pq.span() != 1 {
			t.Fatalf("count %d size %d span %d while consuming", pq.count(), pq.size(), pq.span())
		}
		// A message being consumed is not cached twice.
		pq.put(pqMsgs(1))
		if pq.count() != 4 {
			t.Fatalf("count %d after re-put of a consuming message", pq.count())
		}
		if got := pq.commit(); got != 2 {
			t.Fatalf("commit %d", got)
		}
		if pq.count() != 2 || pq.size() != pqBodyBytes(2, 3) {
			t.Fatalf("count %d size %d after commit", pq.count(), pq.size())
		}
		if got := pq.commit(); got != -1 {
			t.Fatalf("empty commit %d", got)
		}
		if got := pqOffsets(pq.takeMessages(10)); !slices.Equal(got, []int64{2, 3}) {
			t.Fatalf("took %v", got)
		}
		if got := pq.commit(); got != 4 {
			t.Fatalf("commit %d", got)
		}
		if got := pq.takeMessages(1); got != nil {
			t.Fatalf("took %v from an empty queue", pqOffsets(got))
		}
		if !pq.put(pqMsgs(4)) {
			t.Fatal("put after the queue ran dry did not dispatch")
		}
	})

	t.Run("remove sees the consuming set", func(t *testing.T) {
		pq := newProcessQueue(true, pqT0)
		pq.put(pqMsgs(0, 1, 2))
		pq.takeMessages(1)
		if got := pq.remove(pqMsgs(1)); got != 0 {
			t.Fatalf("remove %d, want the consuming message's offset 0", got)
		}
	})

	t.Run("rollback", func(t *testing.T) {
		pq := newProcessQueue(true, pqT0)
		pq.put(pqMsgs(0, 1, 2, 3))
		pq.takeMessages(3)
		pq.rollback()
		if got := pqCached(pq); !slices.Equal(got, []int64{0, 1, 2, 3}) {
			t.Fatalf("cached %v after rollback", got)
		}
		if pq.count() != 4 || pq.commit() != -1 {
			t.Fatalf("count %d after rollback", pq.count())
		}
		if got := pqOffsets(pq.takeMessages(1)); !slices.Equal(got, []int64{0}) {
			t.Fatalf("took %v", got)
		}
	})

	t.Run("consume again", func(t *testing.T) {
		pq := newProcessQueue(true, pqT0)
		pq.put(pqMsgs(0, 1, 2, 3, 4))
		taken := pq.takeMessages(3)
		pq.makeMessageToConsumeAgain([]*MessageExt{taken[2], taken[0]})
		pq.makeMessageToConsumeAgain(pqMsgs(9)) // not consuming: ignored
		if got := pqCached(pq); !slices.Equal(got, []int64{0, 2, 3, 4}) {
			t.Fatalf("cached %v", got)
		}
		if pq.count() != 5 {
			t.Fatalf("count %d", pq.count())
		}
		// Offset 1 is consumed, but 0 waits to be consumed again.
		if got := pq.commit(); got != 0 {
			t.Fatalf("commit %d, want 0", got)
		}
		if got := pqOffsets(pq.takeMessages(2)); !slices.Equal(got, []int64{0, 2}) {
			t.Fatalf("took %v", got)
		}
		if got := pq.commit(); got != 3 {
			t.Fatalf("commit %d", got)
		}
		if pq.count() != 2 || pq.size() != pqBodyBytes(3, 4) {
			t.Fatalf("count %d size %d", pq.count(), pq.size())
		}
	})
}

func TestProcessQueueTimes(t *testing.T) {
	pq := newProcessQueue(true, pqT0)
	if pq.isPullExpired(pqT0.Add(pqPullMaxIdle), pqPullMaxIdle) {
		t.Fatal("pull expired at exactly 120s")
	}
	if !pq.isPullExpired(pqT0.Add(pqPullMaxIdle+time.Millisecond), pqPullMaxIdle) {
		t.Fatal("pull not expired past 120s")
	}
	pq.pulled(pqT0.Add(time.Minute))
	if pq.isPullExpired(pqT0.Add(pqPullMaxIdle+time.Millisecond), pqPullMaxIdle) {
		t.Fatal("pull expired after a recent pull")
	}

	if pq.locked.Load() {
		t.Fatal("locked at start")
	}
	pq.setLocked(true, pqT0.Add(time.Minute))
	if !pq.locked.Load() {
		t.Fatal("not locked")
	}
	if pq.isLockExpired(pqT0.Add(time.Minute+pqLockMaxLive), pqLockMaxLive) {
		t.Fatal("lock expired at exactly 30s")
	}
	if !pq.isLockExpired(pqT0.Add(time.Minute+pqLockMaxLive+time.Millisecond), pqLockMaxLive) {
		t.Fatal("lock not expired past 30s")
	}
	pq.setLocked(false, pqT0.Add(time.Hour))
	if pq.locked.Load() || !pq.isLockExpired(pqT0.Add(time.Minute+pqLockMaxLive+time.Millisecond), pqLockMaxLive) {
		t.Fatal("unlocking renewed the lock time")
	}
}

// TestProcessQueueConcurrent exercises the lock under -race: pulls, the
// consume service and the sweep run at once.
func TestProcessQueueConcurrent(t *testing.T) {
	pq := newProcessQueue(false, pqT0)
	const n = 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for o := int64(0); o < n; o += 10 {
			pq.put(pqMsgs(o, o+1, o+2, o+3, o+4, o+5, o+6, o+7, o+8, o+9))
		}
	}()
	removed := 0
	for removed < n {
		for o := int64(removed); o < int64(removed)+10; o++ {
			pq.markConsuming(pqMsgs(o), pqT0)
		}
		if pq.count() >= 10 {
			batch := pqMsgs(pqCached(pq)[:10]...)
			pq.remove(batch)
			removed += 10
		}
		pq.cleanExpired(pqT0, time.Minute, func(*MessageExt) error { return nil })
		pq.span()
	}
	<-done
	if got := pq.remove(nil); got != n || pq.count() != 0 {
		t.Fatalf("commit %d count %d", got, pq.count())
	}
}
