package store_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// fakeClock is a settable clock in milliseconds.
type fakeClock struct{ ms atomic.Int64 }

func (c *fakeClock) now() time.Time { return time.UnixMilli(c.ms.Load()) }

func keyed(topic, body, keys, uniq string) *message.Message {
	m := storetest.Msg(topic, 0, body)
	p := map[string]string{}
	if keys != "" {
		p[message.PropertyKeys] = keys
	}
	if uniq != "" {
		p[message.PropertyUniqKey] = uniq
	}
	m.Properties = message.EncodeProperties(p)
	return m
}

// bodiesAt reads the records at offs and returns their bodies.
func bodiesAt(t *testing.T, s *store.Store, offs []int64) []string {
	t.Helper()
	var out []string
	for _, off := range offs {
		r, err := s.ReadRecordAt(off)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		out = append(out, string(r.Body()))
	}
	return out
}

func query(t *testing.T, s *store.Store, topic, key string, unique bool, begin, end int64, limit int) []int64 {
	t.Helper()
	offs, err := s.QueryByKey(topic, key, unique, begin, end, limit)
	if err != nil {
		t.Fatal(err)
	}
	return offs
}

func TestQueryByKey(t *testing.T) {
	clk := &fakeClock{}
	clk.ms.Store(1_000_000)
	s := storetest.Open(t, store.Options{Dir: t.TempDir(), SegmentSize: 64 << 10, Now: clk.now, Logger: quietLogger()})
	defer s.Close()

	// 300 messages share key "order", across several segments and store
	// times 1_000_000 + i; every tenth also carries "ten".
	const n = 300
	for i := 0; i < n; i++ {
		clk.ms.Store(1_000_000 + int64(i))
		keys := "order k" + fmt.Sprint(i)
		if i%10 == 0 {
			keys += "  ten"
		}
		if err := s.Append([]*message.Message{keyed("T", fmt.Sprintf("m%03d-%s", i, strings.Repeat("x", 400)), keys, fmt.Sprintf("U%03d", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, logEnd := s.CommitLogOffsets(); logEnd < 2*64<<10 {
		t.Fatalf("want several segments, log ends at %d", logEnd)
	}

	all := query(t, s, "T", "order", false, 0, 1<<62, 0)
	if len(all) != n {
		t.Fatalf("order: %d results, want %d", len(all), n)
	}
	// Newest first.
	for i, b := range bodiesAt(t, s, all) {
		if !strings.HasPrefix(b, fmt.Sprintf("m%03d-", n-1-i)) {
			t.Fatalf("result %d is %q", i, b[:5])
		}
	}

	t.Run("time bounds", func(t *testing.T) {
		got := bodiesAt(t, s, query(t, s, "T", "order", false, 1_000_100, 1_000_109, 0))
		if len(got) != 10 || !strings.HasPrefix(got[0], "m109-") || !strings.HasPrefix(got[9], "m100-") {
			t.Fatalf("bounds [100,109]: %d results from %q", len(got), got)
		}
		if got := query(t, s, "T", "order", false, 2_000_000, 3_000_000, 0); len(got) != 0 {
			t.Fatalf("after every message: %d results", len(got))
		}
		if got := query(t, s, "T", "order", false, 5, 4, 0); len(got) != 0 {
			t.Fatalf("empty range: %d results", len(got))
		}
	})
	t.Run("limit", func(t *testing.T) {
		if got := query(t, s, "T", "order", false, 0, 1<<62, 7); !slices.Equal(got, all[:7]) {
			t.Fatalf("limit 7: %v", got)
		}
		if got := query(t, s, "T", "ten", false, 0, 1<<62, 0); len(got) != n/10 {
			t.Fatalf("ten: %d results", len(got))
		}
	})
	t.Run("unique", func(t *testing.T) {
		got := bodiesAt(t, s, query(t, s, "T", "U042", true, 0, 1<<62, 0))
		if len(got) != 1 || !strings.HasPrefix(got[0], "m042-") {
			t.Fatalf("U042: %q", got)
		}
		// KEYS and UNIQ_KEY are apart.
		if got := query(t, s, "T", "U042", false, 0, 1<<62, 0); len(got) != 0 {
			t.Fatalf("U042 as a key: %d results", len(got))
		}
		if got := query(t, s, "T", "k42", true, 0, 1<<62, 0); len(got) != 0 {
			t.Fatalf("k42 as a unique key: %d results", len(got))
		}
	})
	t.Run("other topic", func(t *testing.T) {
		if got := query(t, s, "T2", "order", false, 0, 1<<62, 0); len(got) != 0 {
			t.Fatalf("T2: %d results", len(got))
		}
	})
}

// TestQueryByKeyNoCollision checks that topic and key boundaries are kept:
// topic "ab" with key "c" is not topic "a" with key "bc".
func TestQueryByKeyNoCollision(t *testing.T) {
	s := storetest.Open(t, store.Options{Dir: t.TempDir(), Logger: quietLogger()})
	defer s.Close()
	if err := s.Append([]*message.Message{keyed("ab", "one", "c", ""), keyed("a", "two", "bc", ""), keyed("a", "three", "b", "")}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ topic, key, want string }{{"ab", "c", "one"}, {"a", "bc", "two"}, {"a", "b", "three"}} {
		got := bodiesAt(t, s, query(t, s, c.topic, c.key, false, 0, 1<<62, 0))
		if !slices.Equal(got, []string{c.want}) {
			t.Errorf("%s/%s: %q, want %q", c.topic, c.key, got, c.want)
		}
	}
}

// TestQueryByKeyBounds checks the per-message key count and key length
// bounds.
func TestQueryByKeyBounds(t *testing.T) {
	s := storetest.Open(t, store.Options{Dir: t.TempDir(), Logger: quietLogger()})
	defer s.Close()
	var keys []string
	for i := 0; i < store.MaxIndexKeysPerMessage+5; i++ {
		keys = append(keys, fmt.Sprintf("k%d", i))
	}
	long := strings.Repeat("L", store.MaxIndexKeyLen+1)
	keys = append(keys, long)
	if err := s.Append([]*message.Message{keyed("T", "b", strings.Join(keys, " "), "")}); err != nil {
		t.Fatal(err)
	}
	last := fmt.Sprintf("k%d", store.MaxIndexKeysPerMessage-1)
	if got := query(t, s, "T", last, false, 0, 1<<62, 0); len(got) != 1 {
		t.Errorf("key %s (within the bound): %d results", last, len(got))
	}
	over := fmt.Sprintf("k%d", store.MaxIndexKeysPerMessage)
	if got := query(t, s, "T", over, false, 0, 1<<62, 0); len(got) != 0 {
		t.Errorf("key %s (past the bound): %d results", over, len(got))
	}
	if got := query(t, s, "T", long, false, 0, 1<<62, 0); len(got) != 0 {
		t.Errorf("overlong key: %d results", len(got))
	}
}

func TestQueryByKeyDisabled(t *testing.T) {
	s := storetest.Open(t, store.Options{Dir: t.TempDir(), DisableKeyIndex: true, Logger: quietLogger()})
	defer s.Close()
	if err := s.Append([]*message.Message{keyed("T", "b", "k", "u")}); err != nil {
		t.Fatal(err)
	}
	if got := query(t, s, "T", "k", false, 0, 1<<62, 0); len(got) != 0 {
		t.Fatalf("disabled index found %v", got)
	}
}

// TestQueryByKeyRetention checks that retention takes the entries of the
// segments it deletes with them.
func TestQueryByKeyRetention(t *testing.T) {
	clk := &fakeClock{}
	clk.ms.Store(time.Now().UnixMilli())
	s := storetest.Open(t, store.Options{Dir: t.TempDir(), SegmentSize: 16 << 10, Retention: time.Hour,
		RetentionInterval: time.Hour, DiskHighWater: -1, Now: clk.now, Logger: quietLogger()})
	defer s.Close()
	for i := 0; i < 100; i++ {
		if err := s.Append([]*message.Message{keyed("T", fmt.Sprintf("m%03d-%s", i, strings.Repeat("x", 500)), "k", "")}); err != nil {
			t.Fatal(err)
		}
	}
	before := query(t, s, "T", "k", false, 0, 1<<62, 0)
	if len(before) != 100 {
		t.Fatalf("before retention: %d results", len(before))
	}
	clk.ms.Add((2 * time.Hour).Milliseconds())
	n, err := s.RunRetention()
	if err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	logMin, _ := s.CommitLogOffsets()
	after := query(t, s, "T", "k", false, 0, 1<<62, 0)
	if len(after) == 0 || len(after) >= 100 {
		t.Fatalf("after retention: %d results", len(after))
	}
	for _, off := range after {
		if off < logMin {
			t.Fatalf("entry at %d survives below the log's min offset %d", off, logMin)
		}
	}
	if want := before[:len(after)]; !slices.Equal(after, want) {
		t.Fatalf("after retention: %v, want the newest %d of before", after, len(after))
	}
}

// TestQueryByKeyRecovery crashes a store before its index checkpoint, so
// the reopened store re-dispatches every record: each is indexed once,
// whether or not the entries written before the crash survived it.
func TestQueryByKeyRecovery(t *testing.T) {
	for _, keep := range []int{0, 100} {
		t.Run(fmt.Sprintf("unsynced_kept=%d%%", keep), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			o := store.Options{Dir: "/d", FS: fs, SegmentSize: 32 << 10, CheckpointInterval: time.Hour, Logger: quietLogger()}
			s := storetest.Open(t, o)
			for i := 0; i < 200; i++ {
				if err := s.Append([]*message.Message{keyed("T", fmt.Sprintf("m%03d-%s", i, strings.Repeat("x", 300)), "k", fmt.Sprintf("U%d", i))}); err != nil {
					t.Fatal(err)
				}
			}
			want := query(t, s, "T", "k", false, 0, 1<<62, 0)
			o.FS = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keep, RNG: rand.New(rand.NewPCG(1, 2))})
			s.Close()
			s2 := storetest.Open(t, o)
			defer s2.Close()
			if got := query(t, s2, "T", "k", false, 0, 1<<62, 0); !slices.Equal(got, want) {
				t.Fatalf("after recovery: %d results, want %d", len(got), len(want))
			}
			if got := query(t, s2, "T", "U7", true, 0, 1<<62, 0); len(got) != 1 {
				t.Fatalf("U7 after recovery: %d results", len(got))
			}
		})
	}
}
