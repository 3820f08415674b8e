package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

var (
	offQ0 = MessageQueue{Topic: "T", BrokerName: "broker-a", QueueID: 0}
	offQ1 = MessageQueue{Topic: "T", BrokerName: "broker-a", QueueID: 1}
	offQ2 = MessageQueue{Topic: "U", BrokerName: "broker-b", QueueID: 0}
)

// fakeOffsetBroker records offset updates and fails the queues in fail.
type fakeOffsetBroker struct {
	mu       sync.Mutex
	offsets  map[MessageQueue]int64
	updates  []string // "<topic><queueId>=<offset>", in order
	queries  int
	fail     map[MessageQueue]error
	queryErr error
	// onUpdate runs inside updateConsumerOffset, before it returns.
	onUpdate func(q MessageQueue)
}

func newFakeOffsetBroker() *fakeOffsetBroker {
	return &fakeOffsetBroker{offsets: map[MessageQueue]int64{}, fail: map[MessageQueue]error{}}
}

func (b *fakeOffsetBroker) queryConsumerOffset(_ context.Context, group string, q MessageQueue) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queries++
	if group != "G" {
		return 0, fmt.Errorf("group %q", group)
	}
	if b.queryErr != nil {
		return 0, b.queryErr
	}
	o, ok := b.offsets[q]
	if !ok {
		return 0, errOffsetNotFound
	}
	return o, nil
}

func (b *fakeOffsetBroker) updateConsumerOffset(_ context.Context, group string, q MessageQueue, offset int64) error {
	if b.onUpdate != nil {
		b.onUpdate(q)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if group != "G" {
		return fmt.Errorf("group %q", group)
	}
	if err := b.fail[q]; err != nil {
		return err
	}
	b.offsets[q] = offset
	b.updates = append(b.updates, fmt.Sprintf("%s%d=%d", q.Topic, q.QueueID, offset))
	return nil
}

// takeUpdates returns and clears the updates so far.
func (b *fakeOffsetBroker) takeUpdates() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.updates
	b.updates = nil
	return u
}

func mustReadOffset(t *testing.T, s offsetStore, q MessageQueue, from readType) int64 {
	t.Helper()
	o, err := s.read(context.Background(), q, from)
	if err != nil {
		t.Fatalf("read %s: %v", q, err)
	}
	return o
}

func TestRemoteOffsetStoreUpdate(t *testing.T) {
	s := newRemoteOffsetStore("G", newFakeOffsetBroker())
	if got := mustReadOffset(t, s, offQ0, readMemory); got != -1 {
		t.Fatalf("empty memory: %d", got)
	}
	steps := []struct {
		offset       int64
		increaseOnly bool
		want         int64
	}{
		{5, true, 5},  // first update always sets
		{3, true, 5},  // consume progress never moves back
		{5, true, 5},  // equal: unchanged
		{9, true, 9},  // forward
		{3, false, 3}, // seek or reset moves back
		{4, true, 4},
	}
	for i, st := range steps {
		s.update(offQ0, st.offset, st.increaseOnly)
		if got := mustReadOffset(t, s, offQ0, readMemory); got != st.want {
			t.Fatalf("step %d: offset %d, want %d", i, got, st.want)
		}
	}
}

func TestRemoteOffsetStoreRead(t *testing.T) {
	ctx := context.Background()
	b := newFakeOffsetBroker()
	s := newRemoteOffsetStore("G", b)

	// Missing on the broker: -1, no error, nothing cached.
	if got := mustReadOffset(t, s, offQ0, readStore); got != -1 {
		t.Fatalf("missing: %d", got)
	}
	if got := mustReadOffset(t, s, offQ0, readMemory); got != -1 {
		t.Fatalf("missing cached as %d", got)
	}

	// A transport error is returned.
	boom := errors.New("connection refused")
	b.queryErr = boom
	if o, err := s.read(ctx, offQ0, readMemoryThenStore); o != -1 || !errors.Is(err, boom) {
		t.Fatalf("transport error: %d %v", o, err)
	}
	b.queryErr = nil

	// Found: returned and cached; persist sends it back as it is.
	b.offsets[offQ0] = 42
	if got := mustReadOffset(t, s, offQ0, readMemoryThenStore); got != 42 {
		t.Fatalf("from store: %d", got)
	}
	queries := b.queries
	if got := mustReadOffset(t, s, offQ0, readMemoryThenStore); got != 42 || b.queries != queries {
		t.Fatalf("memory first: %d after %d queries", got, b.queries-queries)
	}
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if u := b.takeUpdates(); !slices.Equal(u, []string{"T0=42"}) || b.offsets[offQ0] != 42 {
		t.Fatalf("persisted %v after reading 42 from the broker, which now has %d", u, b.offsets[offQ0])
	}

	// readStore replaces what memory holds.
	s.update(offQ0, 50, true)
	b.offsets[offQ0] = 7
	if got := mustReadOffset(t, s, offQ0, readStore); got != 7 {
		t.Fatalf("store: %d", got)
	}
	if got := mustReadOffset(t, s, offQ0, readMemory); got != 7 {
		t.Fatalf("memory after store read: %d", got)
	}
}

func TestRemoteOffsetStorePersist(t *testing.T) {
	ctx := context.Background()
	b := newFakeOffsetBroker()
	s := newRemoteOffsetStore("G", b)
	s.update(offQ0, 10, true)
	s.update(offQ1, 20, true)
	s.update(offQ2, 30, true)

	// Only the queues asked for.
	if err := s.persist(ctx, []MessageQueue{offQ1, offQ0}); err != nil {
		t.Fatal(err)
	}
	if u := b.takeUpdates(); !slices.Equal(u, []string{"T1=20", "T0=10"}) {
		t.Fatalf("updates %v", u)
	}
	// Unchanged queues are sent again: the broker's copy may have moved
	// back meanwhile, and is put right.
	b.mu.Lock()
	b.offsets[offQ0] = 7
	b.mu.Unlock()
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if u := b.takeUpdates(); !slices.Equal(u, []string{"T0=10", "T1=20", "U0=30"}) || b.offsets[offQ0] != 10 {
		t.Fatalf("updates %v, broker has %d", u, b.offsets[offQ0])
	}
	s.update(offQ1, 21, true)
	s.update(offQ0, 5, true) // not an increase: unchanged
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if u := b.takeUpdates(); !slices.Equal(u, []string{"T0=10", "T1=21", "U0=30"}) {
		t.Fatalf("updates %v", u)
	}

	// A reset is persisted like any change.
	s.update(offQ0, 3, false)
	if err := s.persist(ctx, []MessageQueue{offQ0}); err != nil {
		t.Fatal(err)
	}
	if u := b.takeUpdates(); !slices.Equal(u, []string{"T0=3"}) || b.offsets[offQ0] != 3 {
		t.Fatalf("updates %v, broker has %d", u, b.offsets[offQ0])
	}

	// Removed and unknown queues are skipped.
	s.update(offQ2, 31, true)
	s.remove(offQ2)
	if err := s.persist(ctx, []MessageQueue{offQ2, {Topic: "X"}}); err != nil {
		t.Fatal(err)
	}
	if u := b.takeUpdates(); len(u) != 0 {
		t.Fatalf("updates %v for removed queues", u)
	}
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if u := b.takeUpdates(); !slices.Equal(u, []string{"T0=3", "T1=21"}) {
		t.Fatalf("updates %v, want only the queues held", u)
	}
}

func TestRemoteOffsetStorePersistErrors(t *testing.T) {
	ctx := context.Background()
	b := newFakeOffsetBroker()
	s := newRemoteOffsetStore("G", b)
	s.update(offQ0, 10, true)
	s.update(offQ1, 20, true)
	s.update(offQ2, 30, true)
	errA, errB := errors.New("broker-a down"), errors.New("broker-b down")
	b.fail[offQ0] = errA
	b.fail[offQ2] = errB

	err := s.persistAll(ctx)
	if !errors.Is(err, errA) || !errors.Is(err, errB) {
		t.Fatalf("error %v does not join both failures", err)
	}
	if !strings.Contains(err.Error(), offQ0.String()) || !strings.Contains(err.Error(), offQ2.String()) {
		t.Fatalf("error %q does not name the queues", err)
	}
	if u := b.takeUpdates(); !slices.Equal(u, []string{"T1=20"}) {
		t.Fatalf("updates %v", u)
	}

	// The failed ones are retried, with the others.
	delete(b.fail, offQ0)
	delete(b.fail, offQ2)
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if u := b.takeUpdates(); !slices.Equal(u, []string{"T0=10", "T1=20", "U0=30"}) {
		t.Fatalf("retry updates %v", u)
	}
}

// TestRemoteOffsetStoreUpdateDuringPersist checks that progress made while
// a persist is in flight is sent by the next one.
func TestRemoteOffsetStoreUpdateDuringPersist(t *testing.T) {
	ctx := context.Background()
	b := newFakeOffsetBroker()
	s := newRemoteOffsetStore("G", b)
	s.update(offQ0, 10, true)
	once := true
	b.onUpdate = func(q MessageQueue) {
		if once {
			once = false
			s.update(q, 11, true)
		}
	}
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if u := b.takeUpdates(); !slices.Equal(u, []string{"T0=10", "T0=11"}) {
		t.Fatalf("updates %v", u)
	}
}

func TestRemoteOffsetStoreConcurrent(t *testing.T) {
	ctx := context.Background()
	b := newFakeOffsetBroker()
	s := newRemoteOffsetStore("G", b)
	var wg sync.WaitGroup
	for _, q := range []MessageQueue{offQ0, offQ1, offQ2} {
		wg.Go(func() {
			for o := range int64(500) {
				s.update(q, o, true)
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			if err := s.persistAll(ctx); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []MessageQueue{offQ0, offQ1, offQ2} {
		if b.offsets[q] != 499 {
			t.Fatalf("%s: broker has %d", q, b.offsets[q])
		}
	}
}

// newTestLocalStore returns a store under dir with client "c1" and group "G".
func newTestLocalStore(dir string) *localOffsetStore { return newLocalOffsetStore(dir, "c1", "G") }

func localOffsetsPath(dir string) string { return filepath.Join(dir, "c1", "G", "offsets.json") }

// readOffsetsJSON decodes a file written by the local store.
func readOffsetsJSON(t *testing.T, path string) map[MessageQueue]int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Offsets []struct {
			Topic      string `json:"topic"`
			BrokerName string `json:"brokerName"`
			QueueID    int32  `json:"queueId"`
			Offset     int64  `json:"offset"`
		} `json:"offsets"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := map[MessageQueue]int64{}
	for _, e := range f.Offsets {
		out[MessageQueue{Topic: e.Topic, BrokerName: e.BrokerName, QueueID: e.QueueID}] = e.Offset
	}
	return out
}

func loadedLocalStore(t *testing.T, dir string) *localOffsetStore {
	t.Helper()
	s := newTestLocalStore(dir)
	if err := s.load(); err != nil {
		t.Fatal(err)
	}
	return s
}

func checkStoredOffsets(t *testing.T, s offsetStore, want map[MessageQueue]int64) {
	t.Helper()
	for _, q := range []MessageQueue{offQ0, offQ1, offQ2} {
		w, ok := want[q]
		if !ok {
			w = -1
		}
		if got := mustReadOffset(t, s, q, readMemory); got != w {
			t.Fatalf("%s: %d, want %d", q, got, w)
		}
	}
}

func TestLocalOffsetStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := loadedLocalStore(t, dir)
	checkStoredOffsets(t, s, nil)
	s.update(offQ0, 10, true)
	s.update(offQ1, 20, true)
	s.update(offQ2, 30, true)
	s.update(offQ2, 25, true)
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[MessageQueue]int64{offQ0: 10, offQ1: 20, offQ2: 30}
	if got := readOffsetsJSON(t, localOffsetsPath(dir)); !maps.Equal(got, want) {
		t.Fatalf("file holds %v", got)
	}
	checkStoredOffsets(t, loadedLocalStore(t, dir), want)

	// The file's entries are sorted.
	b, _ := os.ReadFile(localOffsetsPath(dir))
	i0, i1, i2 := strings.Index(string(b), `"queueId": 0`), strings.Index(string(b), `"queueId": 1`), strings.Index(string(b), `"broker-b"`)
	if !(i0 < i1 && i1 < i2) {
		t.Fatalf("entries out of order:\n%s", b)
	}

	// Reading from the store reads the file.
	s2 := newTestLocalStore(dir)
	if got := mustReadOffset(t, s2, offQ1, readMemoryThenStore); got != 20 {
		t.Fatalf("from file: %d", got)
	}
	if got := mustReadOffset(t, s2, MessageQueue{Topic: "X"}, readStore); got != -1 {
		t.Fatalf("unknown queue from file: %d", got)
	}

	// A removed queue leaves the file at the next persist.
	s.remove(offQ1)
	if err := s.persist(ctx, []MessageQueue{offQ0}); err != nil {
		t.Fatal(err)
	}
	if got := readOffsetsJSON(t, localOffsetsPath(dir)); !maps.Equal(got, map[MessageQueue]int64{offQ0: 10, offQ2: 30}) {
		t.Fatalf("after remove the file holds %v", got)
	}
}

func TestLocalOffsetStoreSkipsUnchanged(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := loadedLocalStore(t, dir)
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(localOffsetsPath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("an empty, unchanged table was written: %v", err)
	}
	s.update(offQ0, 1, true)
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(localOffsetsPath(dir)); err != nil {
		t.Fatal(err)
	}
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(localOffsetsPath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("unchanged offsets were written again: %v", err)
	}
	s.update(offQ0, 2, true)
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readOffsetsJSON(t, localOffsetsPath(dir)); got[offQ0] != 2 {
		t.Fatalf("file holds %v", got)
	}
}

func TestLocalOffsetStoreBackup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	main := localOffsetsPath(dir)
	bak := main + ".bak"
	s := loadedLocalStore(t, dir)
	s.update(offQ0, 1, true)
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bak); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("backup after the first write: %v", err)
	}
	s.update(offQ0, 2, true)
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readOffsetsJSON(t, bak); got[offQ0] != 1 {
		t.Fatalf("backup holds %v", got)
	}
	if got := readOffsetsJSON(t, main); got[offQ0] != 2 {
		t.Fatalf("main holds %v", got)
	}
	if _, err := os.Stat(main + ".tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temporary file left: %v", err)
	}
}

func TestLocalOffsetStoreLoad(t *testing.T) {
	good := func(offset int64) string {
		return fmt.Sprintf(`{"offsets":[{"topic":"T","brokerName":"broker-a","queueId":0,"offset":%d}]}`, offset)
	}
	const corrupt = `{"offsets":[{"topic":"T","brok`
	cases := []struct {
		name      string
		main, bak string // "" means absent
		tmp       string // a crash left this temporary file
		want      int64  // offset of offQ0, -1 for none
		wantErr   bool
	}{
		{name: "both missing", want: -1},
		{name: "main", main: good(7), bak: good(3), want: 7},
		{name: "main missing, crash between renames", bak: good(3), tmp: good(9), want: 3},
		{name: "main corrupt", main: corrupt, bak: good(3), want: 3},
		{name: "main empty", main: " ", bak: good(3), want: 3},
		{name: "half-written temporary file ignored", main: good(7), bak: good(3), tmp: corrupt, want: 7},
		{name: "both corrupt", main: corrupt, bak: corrupt, wantErr: true},
		{name: "main corrupt, no backup", main: corrupt, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			main := localOffsetsPath(dir)
			if err := os.MkdirAll(filepath.Dir(main), 0o755); err != nil {
				t.Fatal(err)
			}
			for suffix, content := range map[string]string{"": tc.main, ".bak": tc.bak, ".tmp": tc.tmp} {
				if content != "" {
					if err := os.WriteFile(main+suffix, []byte(content), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			s := newTestLocalStore(dir)
			err := s.load()
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := mustReadOffset(t, s, offQ0, readMemory); got != tc.want {
				t.Fatalf("offset %d, want %d", got, tc.want)
			}
		})
	}
}

// TestLocalOffsetStoreCorruptMainKeepsBackup checks that a write after
// loading from the backup does not turn the corrupt file into the backup.
func TestLocalOffsetStoreCorruptMainKeepsBackup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	main := localOffsetsPath(dir)
	if err := os.MkdirAll(filepath.Dir(main), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main, []byte("{garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(main+".bak", []byte(`{"offsets":[{"topic":"T","brokerName":"broker-a","queueId":0,"offset":3}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := loadedLocalStore(t, dir)
	s.update(offQ0, 4, true)
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readOffsetsJSON(t, main+".bak"); got[offQ0] != 3 {
		t.Fatalf("backup holds %v", got)
	}
	if got := readOffsetsJSON(t, main); got[offQ0] != 4 {
		t.Fatalf("main holds %v", got)
	}
	// From now on the main file is ours and becomes the backup.
	s.update(offQ0, 5, true)
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readOffsetsJSON(t, main+".bak"); got[offQ0] != 4 {
		t.Fatalf("backup holds %v", got)
	}
}

func TestLocalOffsetStorePersistErrorRetried(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := loadedLocalStore(t, dir)
	s.update(offQ0, 1, true)
	// A file where the group directory should be makes the write fail.
	if err := os.MkdirAll(filepath.Join(dir, "c1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "c1", "G"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.persistAll(ctx); err == nil {
		t.Fatal("no error")
	}
	if err := os.Remove(filepath.Join(dir, "c1", "G")); err != nil {
		t.Fatal(err)
	}
	if err := s.persistAll(ctx); err != nil {
		t.Fatal(err)
	}
	if got := readOffsetsJSON(t, localOffsetsPath(dir)); got[offQ0] != 1 {
		t.Fatalf("file holds %v", got)
	}
}
