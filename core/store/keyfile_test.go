package store_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

// keyFiles lists the key index's files under dir, oldest first.
func keyFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "keyindex", "*.kidx"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// appendKeyed appends n messages numbered from first, one per append:
// keys "order" and "k<i>", UNIQ_KEY "U<i>", so three entries each.
func appendKeyed(t testing.TB, s *store.Store, first, n int) {
	t.Helper()
	for i := first; i < first+n; i++ {
		m := keyed("T", fmt.Sprintf("m%03d-%s", i, strings.Repeat("x", 200)), fmt.Sprintf("order k%d", i), fmt.Sprintf("U%d", i))
		if err := s.Append([]*message.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkKeyed checks that the n messages of appendKeyed are all found.
func checkKeyed(t *testing.T, s *store.Store, n int) {
	t.Helper()
	all := bodiesAt(t, s, query(t, s, "T", "order", false, 0, 1<<62, 0))
	if len(all) != n {
		t.Fatalf("order: %d results, want %d", len(all), n)
	}
	for i, b := range all {
		if !strings.HasPrefix(b, fmt.Sprintf("m%03d-", n-1-i)) {
			t.Fatalf("order: result %d is %q, want m%03d", i, b[:4], n-1-i)
		}
	}
	for _, i := range []int{0, n / 2, n - 1} {
		if got := bodiesAt(t, s, query(t, s, "T", fmt.Sprintf("U%d", i), true, 0, 1<<62, 0)); len(got) != 1 || !strings.HasPrefix(got[0], fmt.Sprintf("m%03d-", i)) {
			t.Fatalf("U%d: %d results", i, len(got))
		}
		if got := query(t, s, "T", fmt.Sprintf("k%d", i), false, 0, 1<<62, 0); len(got) != 1 {
			t.Fatalf("k%d: %d results", i, len(got))
		}
	}
}

// TestKeyIndexFilesRoll fills many small key-index files and checks that
// queries span them, before and after a restart, and that appends after
// the restart go on from the rebuilt newest file.
func TestKeyIndexFilesRoll(t *testing.T) {
	dir := t.TempDir()
	o := store.Options{Dir: dir, KeyIndexFileEntries: 64, Logger: quietLogger()}
	s := storetest.Open(t, o)
	appendKeyed(t, s, 0, 100) // 300 entries: four full files and a partial one
	if n := len(keyFiles(t, dir)); n != 5 {
		t.Fatalf("%d key-index files, want 5", n)
	}
	checkKeyed(t, s, 100)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = storetest.Open(t, o)
	defer s.Close()
	checkKeyed(t, s, 100)
	appendKeyed(t, s, 100, 50)
	checkKeyed(t, s, 150)
	if n := len(keyFiles(t, dir)); n != 8 {
		t.Fatalf("%d key-index files, want 8", n)
	}
}

// TestKeyIndexCatchesUp opens a store whose key index lags its log: one
// written with the index off, then one whose index files were removed.
// Either way the records are indexed at startup.
func TestKeyIndexCatchesUp(t *testing.T) {
	dir := t.TempDir()
	o := store.Options{Dir: dir, KeyIndexFileEntries: 64, DisableKeyIndex: true, Logger: quietLogger()}
	s := storetest.Open(t, o)
	appendKeyed(t, s, 0, 40)
	s.Close()
	if n := len(keyFiles(t, dir)); n != 0 {
		t.Fatalf("%d key-index files with the index off", n)
	}

	o.DisableKeyIndex = false
	s = storetest.Open(t, o)
	checkKeyed(t, s, 40)
	appendKeyed(t, s, 40, 10)
	s.Close()

	if err := os.RemoveAll(filepath.Join(dir, "keyindex")); err != nil {
		t.Fatal(err)
	}
	s = storetest.Open(t, o)
	defer s.Close()
	checkKeyed(t, s, 50)
}

// TestKeyIndexDamage damages key-index files and checks that the store
// opens and still finds every record: a damaged newest file is indexed
// again from where the file before it ends, any other damage rebuilds
// the index from the log.
func TestKeyIndexDamage(t *testing.T) {
	damage := map[string]func(t *testing.T, files []string){
		"newest header": func(t *testing.T, files []string) { flip(t, files[len(files)-1], 20) },
		"newest cut short": func(t *testing.T, files []string) {
			f := files[len(files)-1]
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(f, fi.Size()-10); err != nil {
				t.Fatal(err)
			}
		},
		"newest entry link": func(t *testing.T, files []string) { flip(t, files[len(files)-1], int64(64+8*4+keyEntryOffset(1)+24)) },
		"newest empty": func(t *testing.T, files []string) {
			if err := os.Truncate(files[len(files)-1], 0); err != nil {
				t.Fatal(err)
			}
		},
		"middle header": func(t *testing.T, files []string) { flip(t, files[1], 30) },
		"middle removed": func(t *testing.T, files []string) {
			if err := os.Remove(files[1]); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, fn := range damage {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			o := store.Options{Dir: dir, KeyIndexFileEntries: 64, Logger: quietLogger()}
			s := storetest.Open(t, o)
			appendKeyed(t, s, 0, 80) // 240 entries: three full files and a partial one
			s.Close()
			files := keyFiles(t, dir)
			if len(files) != 4 {
				t.Fatalf("%d key-index files, want 4", len(files))
			}
			fn(t, files)
			s = storetest.Open(t, o)
			defer s.Close()
			checkKeyed(t, s, 80)
		})
	}
}

// keyEntryOffset is where entry no (from 1) starts within the entries.
func keyEntryOffset(no int) int { return (no - 1) * 28 }

// flip inverts one byte of file at off.
func flip(t *testing.T, file string, off int64) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if off >= int64(len(b)) {
		t.Fatalf("%s has %d bytes, none at %d", file, len(b), off)
	}
	b[off] ^= 0xff
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestKeyIndexRetentionDropsFiles checks that retention removes the
// key-index files whose records it deleted, and keeps the rest.
func TestKeyIndexRetentionDropsFiles(t *testing.T) {
	clk := &fakeClock{}
	clk.ms.Store(time.Now().UnixMilli())
	dir := t.TempDir()
	s := storetest.Open(t, store.Options{Dir: dir, SegmentSize: 16 << 10, KeyIndexFileEntries: 64, Retention: time.Hour,
		RetentionInterval: time.Hour, DiskHighWater: -1, Now: clk.now, Logger: quietLogger()})
	defer s.Close()
	appendKeyed(t, s, 0, 100)
	before := keyFiles(t, dir)
	clk.ms.Add((2 * time.Hour).Milliseconds())
	appendKeyed(t, s, 100, 1) // a fresh segment keeps the newest records
	if n, err := s.RunRetention(); err != nil || n == 0 {
		t.Fatalf("retention deleted %d segments: %v", n, err)
	}
	after := keyFiles(t, dir)
	if len(after) >= len(before) || len(after) == 0 {
		t.Fatalf("key-index files: %d before retention, %d after", len(before), len(after))
	}
	logMin, _ := s.CommitLogOffsets()
	for _, off := range query(t, s, "T", "order", false, 0, 1<<62, 0) {
		if off < logMin {
			t.Fatalf("found %d below the log's min offset %d", off, logMin)
		}
	}
	if got := query(t, s, "T", "U100", true, 0, 1<<62, 0); len(got) != 1 {
		t.Fatalf("U100: %d results", len(got))
	}
}

// FuzzKeyIndexFile overwrites bytes of a key-index file, sealed or the
// newest, and opens the store: it must open, and queries must answer
// without error, with offsets inside the log (a damaged entry may name
// the middle of a record: callers read and check each one).
func FuzzKeyIndexFile(f *testing.F) {
	base := vfs.NewCrashableMem()
	o := store.Options{Dir: "/d", FS: base, KeyIndexFileEntries: 64, IndexMemTableSize: 1 << 20, Logger: quietLogger()}
	s := storetest.Open(f, o)
	appendKeyed(f, s, 0, 30) // 90 entries: a sealed file and the newest
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	f.Add(false, uint16(20), []byte{0xff})
	f.Add(true, uint16(64+8*4+24), []byte{1, 2, 3, 4})
	f.Add(true, uint16(16), []byte{0, 0, 0, 90})
	f.Add(false, uint16(64), []byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, newest bool, at uint16, data []byte) {
		fs := base.CrashClone(vfs.CrashCloneCfg{})
		name := "/d/keyindex/00000000000000000000.kidx"
		if newest {
			name = "/d/keyindex/00000000000000000001.kidx"
		}
		kf, err := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kf.WriteAt(data, int64(at)); err != nil {
			t.Fatal(err)
		}
		kf.Close()
		o := o
		o.FS = fs
		s := storetest.Open(t, o)
		defer s.Close()
		for _, q := range []struct {
			key    string
			unique bool
		}{{"order", false}, {"k3", false}, {"U29", true}, {"U0", true}} {
			offs, err := s.QueryByKey("T", q.key, q.unique, 0, 1<<62, 0)
			if err != nil {
				t.Fatalf("%s: %v", q.key, err)
			}
			if len(offs) > 30 {
				t.Fatalf("%s: %d results from 30 records", q.key, len(offs))
			}
			logMin, logEnd := s.CommitLogOffsets()
			for _, off := range offs {
				if off < logMin || off >= logEnd {
					t.Fatalf("%s: result %d outside the log [%d, %d)", q.key, off, logMin, logEnd)
				}
				s.ReadRecordAt(off)
			}
		}
	})
}

// TestKeyIndexCrash crashes a store whose key index spans several files,
// some full and not yet sealed, with some or none of its unsynced writes
// kept, and checks that the reopened store finds every record: what the
// files lost is indexed again from their last synced end.
func TestKeyIndexCrash(t *testing.T) {
	for _, keep := range []int{0, 50, 100} {
		for _, synced := range []int{0, 30} {
			t.Run(fmt.Sprintf("kept=%d%%/synced_at=%d", keep, synced), func(t *testing.T) {
				fs := vfs.NewCrashableMem()
				o := store.Options{Dir: "/d", FS: fs, KeyIndexFileEntries: 64, CheckpointInterval: time.Hour,
					IndexMemTableSize: 1 << 20, Logger: quietLogger()}
				s := storetest.Open(t, o)
				appendKeyed(t, s, 0, synced)
				if err := s.Checkpoint(); err != nil {
					t.Fatal(err)
				}
				appendKeyed(t, s, synced, 80-synced)
				o.FS = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: keep, RNG: rand.New(rand.NewPCG(3, uint64(keep)))})
				s.Close()
				s = storetest.Open(t, o)
				defer s.Close()
				checkKeyed(t, s, 80)
			})
		}
	}
}

// TestKeyIndexWriteFailure makes the key index's writes fail midway: appends
// go on, the failure is counted, what was indexed before it is still found,
// and after a restart on a healthy disk every record is found again.
func TestKeyIndexWriteFailure(t *testing.T) {
	var failing atomic.Bool
	inj := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if failing.Load() && strings.Contains(op.Path, "keyindex") && (op.Kind == errorfs.OpFileWriteAt || op.Kind == errorfs.OpCreate) {
			return errorfs.ErrInjected
		}
		return nil
	})
	mem := vfs.NewCrashableMem()
	o := store.Options{Dir: "/d", FS: errorfs.Wrap(mem, inj), KeyIndexFileEntries: 64, IndexMemTableSize: 1 << 20, Logger: quietLogger()}
	s := storetest.Open(t, o)
	appendKeyed(t, s, 0, 30)
	failing.Store(true)
	appendKeyed(t, s, 30, 30) // the appends themselves succeed
	if n := s.Stats().KeyIndexFailures.Load(); n != 1 {
		t.Fatalf("%d key-index failures counted, want 1", n)
	}
	if got := query(t, s, "T", "U5", true, 0, 1<<62, 0); len(got) != 1 {
		t.Fatalf("U5, indexed before the failure: %d results", len(got))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	failing.Store(false)
	s = storetest.Open(t, o)
	defer s.Close()
	checkKeyed(t, s, 60)
}
