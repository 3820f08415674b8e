package store_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// readAll returns every body in queues 0..n-1 of topic, failing on any
// read error (a corrupt record included).
func readAll(t *testing.T, s *store.Store, topic string, n int32) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for q := int32(0); q < n; q++ {
		for _, b := range storetest.ReadQueue(t, s, topic, q, 0) {
			seen[b]++
		}
	}
	return seen
}

// TestCrashKeepsAcknowledged crashes a store under concurrent appends at a
// random moment, keeping a random part of the unsynced data, and checks that
// every append acknowledged before the crash is there exactly once.
//
// Under FlushAsync nothing is promised about the last FlushInterval, so the
// check there is that the store recovers to a clean log: every record
// readable, none twice.
func TestCrashKeepsAcknowledged(t *testing.T) {
	rounds := 20
	if testing.Short() {
		rounds = 5
	}
	for _, flush := range []store.FlushMode{store.FlushSync, store.FlushAsync} {
		for round := 0; round < rounds; round++ {
			t.Run(fmt.Sprintf("flush=%v/seed=%d", flush, round), func(t *testing.T) {
				crashOnce(t, flush, uint64(round))
			})
		}
	}
}

func crashOnce(t *testing.T, flush store.FlushMode, seed uint64) {
	{
		{
			rng := rand.New(rand.NewPCG(seed, 7))
			fs := vfs.NewCrashableMem()
			o := store.Options{Dir: "/d", FS: fs, SegmentSize: 32 << 10, Flush: flush, FlushInterval: 5 * time.Millisecond, Logger: quietLogger()}
			s := storetest.Open(t, o)

			var (
				mu    sync.Mutex
				acked = map[string]bool{}
				stop  atomic.Bool
				wg    sync.WaitGroup
			)
			for w := 0; w < 4; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; !stop.Load(); i++ {
						var batch []*message.Message
						for j := 0; j <= i%3; j++ {
							batch = append(batch, storetest.Msg("K", int32(w%3), fmt.Sprintf("w%d-%d-%d-%s", w, i, j, strings.Repeat("p", i%500))))
						}
						if err := s.Append(batch); err != nil {
							return
						}
						mu.Lock()
						for _, m := range batch {
							acked[string(m.Body)] = true
						}
						mu.Unlock()
					}
				}()
			}
			// Crash once enough has been acknowledged.
			target := 50 + rng.IntN(400)
			for {
				mu.Lock()
				n := len(acked)
				mu.Unlock()
				if n >= target {
					break
				}
				runtimeYield()
			}
			mu.Lock()
			before := make(map[string]bool, len(acked))
			for k := range acked {
				before[k] = true
			}
			mu.Unlock()
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rng})
			stop.Store(true)
			wg.Wait()
			s.Close()

			o.FS = crashed
			s2 := storetest.Open(t, o)
			// A crash tears only the unsynced tail: nothing of it may be
			// taken for corruption of durable data.
			if n := s2.Stats().Corruptions.Load(); n != 0 {
				t.Fatalf("recovery after a crash reported %d corruptions", n)
			}
			seen := readAll(t, s2, "K", 3)
			for b := range before {
				if flush == store.FlushAsync {
					break
				}
				if seen[b] != 1 {
					t.Fatalf("acknowledged message %.12s… found %d times after the crash", b, seen[b])
				}
			}
			for b, n := range seen {
				if n != 1 {
					t.Fatalf("message %.12s… found %d times", b, n)
				}
			}
			// The recovered store takes writes and keeps them.
			if err := s2.Append([]*message.Message{storetest.Msg("K", 0, "after-crash")}); err != nil {
				t.Fatal(err)
			}
			s2.Close()
			s3 := storetest.Open(t, o)
			defer s3.Close()
			if got := readAll(t, s3, "K", 3); got["after-crash"] != 1 || len(got) != len(seen)+1 {
				t.Fatalf("after reopen: %d messages, want %d", len(got), len(seen)+1)
			}
		}
	}
}

// TestWriteErrorsLoseNothingAcknowledged injects write and fsync failures
// into the commit log: failed appends report an error and leave nothing
// behind, acknowledged ones survive, and the store recovers once the
// errors stop.
func TestWriteErrorsLoseNothingAcknowledged(t *testing.T) {
	for _, kind := range []errorfs.OpKind{errorfs.OpFileWriteAt, errorfs.OpFileSyncData} {
		t.Run(fmt.Sprint("op=", kind), func(t *testing.T) {
			var failing atomic.Bool
			inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
				if failing.Load() && op.Kind == kind && strings.Contains(op.Path, "commitlog") {
					return errorfs.ErrInjected
				}
				return nil
			})
			mem := vfs.NewCrashableMem()
			o := store.Options{Dir: "/d", FS: errorfs.Wrap(mem, inj), Logger: quietLogger()}
			s := storetest.Open(t, o)
			want := map[string]int{}
			for i := 0; i < 30; i++ {
				failing.Store(i%10 >= 5)
				body := fmt.Sprint("e", i)
				err := s.Append([]*message.Message{storetest.Msg("E", 0, body)})
				if failing.Load() {
					if err == nil {
						t.Fatalf("append %d succeeded while %v fails", i, kind)
					}
					continue
				}
				if err != nil {
					t.Fatalf("append %d: %v", i, err)
				}
				want[body] = 1
			}
			failing.Store(false)
			checkAcknowledged(t, s, o, mem, "E", want)
		})
	}
}

// TestWriteErrorsWithRoundsInFlight fails every fifth commit-log write
// while many appends are in flight, so that a write fails while earlier
// rounds are stored but not yet dispatched: the rollback must not hand
// their queue offsets out again. Every acknowledged append is read back
// once, at an offset of its own, before and after a crash.
func TestWriteErrorsWithRoundsInFlight(t *testing.T) {
	// Every fifth commit-log write fails. Appends wait while more than
	// 4 KiB are pending, so the 3,000 of them make rounds of a few dozen
	// and many writes, however the goroutines are scheduled, and a write
	// fails while the rounds before it are still being dispatched.
	var writes atomic.Int64
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileWriteAt && strings.Contains(op.Path, "commitlog") && writes.Add(1)%5 == 0 {
			return errorfs.ErrInjected
		}
		return nil
	})
	mem := vfs.NewCrashableMem()
	o := store.Options{Dir: "/d", FS: errorfs.Wrap(mem, inj), Logger: quietLogger(), MaxPendingBytes: 4 << 10}
	s := storetest.Open(t, o)
	var (
		mu    sync.Mutex
		acked = map[string]int{}
		wg    sync.WaitGroup
	)
	for i := range 3000 {
		body := fmt.Sprint("w", i)
		wg.Add(1)
		err := s.AppendAsync([]*message.Message{storetest.Msg("W", 0, body)}, func(err error) {
			if err == nil {
				mu.Lock()
				acked[body]++
				mu.Unlock()
			}
			wg.Done()
		})
		if err != nil {
			wg.Done()
		}
	}
	wg.Wait()
	if len(acked) == 0 || len(acked) == 3000 {
		t.Fatalf("%d of 3000 appends acknowledged; want some to fail", len(acked))
	}
	checkAcknowledged(t, s, o, mem, "W", acked)
}

// checkAcknowledged checks that queue 0 of topic in s holds exactly the
// bodies of want, each at an offset of its own (no gaps for failed
// appends), then closes s and checks the same after a crash of mem that
// keeps only what was synced.
func checkAcknowledged(t *testing.T, s *store.Store, o store.Options, mem *vfs.MemFS, topic string, want map[string]int) {
	t.Helper()
	check := func(s *store.Store) {
		t.Helper()
		if got := readAll(t, s, topic, 1); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("read back %d distinct bodies (%d acknowledged); first differences: %v", len(got), len(want), firstDiff(got, want))
		}
		if _, mx := s.QueueOffsets(topic, 0); mx != int64(len(want)) {
			t.Fatalf("max offset %d, want %d (no gaps for failed appends)", mx, len(want))
		}
	}
	check(s)
	s.Close()
	o.FS = mem.CrashClone(vfs.CrashCloneCfg{})
	s = storetest.Open(t, o)
	defer s.Close()
	check(s)
}

// firstDiff lists a few keys whose counts differ between got and want.
func firstDiff(got, want map[string]int) []string {
	var d []string
	for k, v := range want {
		if got[k] != v && len(d) < 5 {
			d = append(d, fmt.Sprintf("%s: %d, want %d", k, got[k], v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok && len(d) < 10 {
			d = append(d, fmt.Sprintf("%s: %d, not acknowledged", k, v))
		}
	}
	return d
}

// TestCorruptRecordDetected flips one bit inside a stored record: reads of
// that record fail loudly, every other record stays readable, and a restart
// that scans the record skips it and keeps the rest.
func TestCorruptRecordDetected(t *testing.T) {
	dir := t.TempDir()
	o := store.Options{Dir: dir, Logger: quietLogger()}
	s := storetest.Open(t, o)
	var msgs []*message.Message
	for i := 0; i < 10; i++ {
		m := storetest.Msg("Z", 0, fmt.Sprint("z", i))
		if err := s.Append([]*message.Message{m}); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	s.Close()

	victim := msgs[4]
	seg := filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", 0))
	// Flip a bit in the victim's properties: the body CRC still matches,
	// only the whole-record checksum notices.
	flipBit(t, seg, victim.CommitLogOffset+int64(victim.RecordLen())-3)

	s = storetest.Open(t, o)
	got := map[string]bool{}
	var corrupt int
	it := s.NewQueueIter("Z", 0, store.IterOptions{OnCorrupt: func(u store.Unit, err error) {
		if !errors.Is(err, store.ErrCorruption) || u.QueueOffset != 4 {
			t.Fatalf("offset %d: %v", u.QueueOffset, err)
		}
		corrupt++
	}})
	for ok := it.SeekGE(0); ok; ok = it.Next() {
		got[string(it.Record().Body())] = true
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if corrupt != 1 || len(got) != 9 || got["z4"] {
		t.Fatalf("corrupt=%d, read %v", corrupt, got)
	}
	if _, err := s.ReadRecordAt(victim.CommitLogOffset); !errors.Is(err, store.ErrCorruption) {
		t.Fatalf("ReadRecordAt of the corrupt record: %v", err)
	}
	if s.Stats().Corruptions.Load() == 0 {
		t.Fatal("corruption not counted")
	}
	s.Close()

	// Make recovery scan the whole log: the corrupt record is mid-log, so
	// it is skipped and the records after it stay.
	if err := os.RemoveAll(filepath.Join(dir, "index")); err != nil {
		t.Fatal(err)
	}
	s = storetest.Open(t, o)
	defer s.Close()
	if s.Stats().Corruptions.Load() == 0 {
		t.Fatal("recovery did not report the corrupt record")
	}
	holes, bodies := 0, 0
	it = s.NewQueueIter("Z", 0, store.IterOptions{OnCorrupt: func(store.Unit, error) { holes++ }})
	for ok := it.SeekGE(0); ok; ok = it.Next() {
		bodies++
	}
	it.Close()
	if holes != 1 || bodies != 9 {
		t.Fatalf("after rebuilding the index: %d holes, %d records", holes, bodies)
	}
	m := storetest.Msg("Z", 0, "next")
	if err := s.Append([]*message.Message{m}); err != nil || m.QueueOffset != 10 {
		t.Fatalf("append after recovery: offset %d, %v", m.QueueOffset, err)
	}
}

// TestRoundMarkersTellCorruptionFromTornTail damages one record of a log
// of single-record rounds and restarts with the whole log scanned. Under
// FlushSync a round is written only after the rounds before it are
// durable, so damage in the last round may be a torn write and is cut;
// damage further back is corruption of durable data, skipped and counted.
// Under FlushAsync nothing proves a round durable, and damage anywhere
// cuts the log there.
func TestRoundMarkersTellCorruptionFromTornTail(t *testing.T) {
	const n = 6
	for _, tc := range []struct {
		name    string
		flush   store.FlushMode
		victim  int
		corrupt bool
	}{
		{"sync/first", store.FlushSync, 0, true},
		{"sync/second-last", store.FlushSync, n - 2, true},
		{"sync/last", store.FlushSync, n - 1, false},
		{"async/second-last", store.FlushAsync, n - 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			o := store.Options{Dir: dir, Flush: tc.flush, Logger: quietLogger()}
			s := storetest.Open(t, o)
			var msgs []*message.Message
			for i := 0; i < n; i++ {
				m := storetest.Msg("R", 0, fmt.Sprint("r", i))
				if err := s.Append([]*message.Message{m}); err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, m)
			}
			s.Close()
			victim := msgs[tc.victim]
			flipBit(t, filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", 0)), victim.CommitLogOffset+int64(victim.RecordLen())-3)
			if err := os.RemoveAll(filepath.Join(dir, "index")); err != nil {
				t.Fatal(err)
			}

			s = storetest.Open(t, o)
			defer s.Close()
			var want []string
			for i := range n {
				if i == tc.victim || (i > tc.victim && !tc.corrupt) {
					continue
				}
				want = append(want, fmt.Sprint("r", i))
			}
			var got []string
			it := s.NewQueueIter("R", 0, store.IterOptions{OnCorrupt: func(store.Unit, error) {}})
			for ok := it.SeekGE(0); ok; ok = it.Next() {
				got = append(got, string(it.Record().Body()))
			}
			it.Close()
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("read %v, want %v", got, want)
			}
			if c := s.Stats().Corruptions.Load(); (c != 0) != tc.corrupt {
				t.Fatalf("%d corruptions reported, want corruption %v", c, tc.corrupt)
			}
		})
	}
}

// TestOpenSyncsLastSegment: the rounds a store writes say in their markers
// that every round before them is durable, and the run before may have
// left its last rounds in the page cache only (a crashed process, or
// FlushAsync), so Open syncs the last segment before it writes.
func TestOpenSyncsLastSegment(t *testing.T) {
	var opening atomic.Bool
	var syncs atomic.Int32
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if opening.Load() && op.Kind == errorfs.OpFileSyncData && strings.Contains(op.Path, "commitlog") {
			syncs.Add(1)
		}
		return nil
	})
	o := store.Options{Dir: "/d", FS: errorfs.Wrap(vfs.NewMem(), inj), Flush: store.FlushAsync, FlushInterval: time.Hour, Logger: quietLogger()}
	s := storetest.Open(t, o)
	if err := s.Append([]*message.Message{storetest.Msg("O", 0, "o")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	o.Flush = store.FlushSync
	opening.Store(true)
	s = storetest.Open(t, o)
	opening.Store(false)
	defer s.Close()
	if syncs.Load() == 0 {
		t.Fatal("Open wrote no fsync of the last segment")
	}
}

// TestTornTailCut truncates the last segment in the middle of its last
// record: recovery cuts that record and keeps everything before it.
func TestTornTailCut(t *testing.T) {
	dir := t.TempDir()
	o := store.Options{Dir: dir, Logger: quietLogger()}
	s := storetest.Open(t, o)
	var last *message.Message
	for i := 0; i < 20; i++ {
		last = storetest.Msg("T", 0, fmt.Sprint("t", i))
		if err := s.Append([]*message.Message{last}); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	seg := filepath.Join(dir, "commitlog", fmt.Sprintf("%020d", 0))
	if err := os.Truncate(seg, last.CommitLogOffset+int64(last.RecordLen())/2); err != nil {
		t.Fatal(err)
	}
	// Also drop the index so the scan covers the torn record.
	os.RemoveAll(filepath.Join(dir, "index"))
	s = storetest.Open(t, o)
	defer s.Close()
	got := storetest.ReadQueue(t, s, "T", 0, 0)
	if len(got) != 19 || got[18] != "t18" {
		t.Fatalf("after cutting the torn tail: %v", got)
	}
	m := storetest.Msg("T", 0, "t19-again")
	// The cut space is reused: the new record lands where the torn one was
	// (after its round's marker), not past the torn bytes.
	if err := s.Append([]*message.Message{m}); err != nil || m.QueueOffset != 19 || m.CommitLogOffset >= last.CommitLogOffset+64 {
		t.Fatalf("append after cut: queue offset %d, log offset %d (want %d), %v", m.QueueOffset, m.CommitLogOffset, last.CommitLogOffset, err)
	}
}

func flipBit(t *testing.T, path string, at int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, at); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, at); err != nil {
		t.Fatal(err)
	}
}

// TestDeleteTopicSurvivesCrash deletes a topic whose records lie past
// the last checkpoint and crashes: recovery, which re-dispatches every
// record past the checkpoint, must not bring the deleted queue back, and
// the records written to the topic after the deletion are its new queue.
func TestDeleteTopicSurvivesCrash(t *testing.T) {
	for _, unsynced := range []int{0, 100} {
		t.Run(fmt.Sprintf("unsynced=%d", unsynced), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			o := store.Options{Dir: "/d", FS: fs, SegmentSize: 64 << 10, CheckpointInterval: time.Hour, Logger: quietLogger()}
			s := storetest.Open(t, o)
			for i := 0; i < 100; i++ {
				if err := s.Append([]*message.Message{storetest.Msg("Gone", 0, fmt.Sprint("old", i)), storetest.Msg("Kept", 0, fmt.Sprint("k", i))}); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.CommitOffset("g", "Gone", 0, 60); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteTopic("Gone"); err != nil {
				t.Fatal(err)
			}
			if err := s.Append([]*message.Message{storetest.Msg("Gone", 0, "new0")}); err != nil {
				t.Fatal(err)
			}
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rand.New(rand.NewPCG(1, 2))})
			s.Close()
			o.FS = crashed
			for range 2 { // the second open recovers from the first one's checkpoint
				s2 := storetest.Open(t, o)
				if got := storetest.ReadQueue(t, s2, "Gone", 0, 0); len(got) != 1 || got[0] != "new0" {
					t.Fatalf("the deleted topic holds %d messages after the crash (%.3v), want only new0", len(got), got)
				}
				if off, ok := s2.ConsumerOffset("g", "Gone", 0); ok {
					t.Fatalf("the deleted topic's offset %d came back", off)
				}
				if got := storetest.ReadQueue(t, s2, "Kept", 0, 0); len(got) != 100 {
					t.Fatalf("the other topic holds %d messages, want 100", len(got))
				}
				s2.Close()
			}
		})
	}
}
