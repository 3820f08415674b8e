package wasm_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/plugins/wasm"
)

// TestHammerReload filters from many goroutines through one plugin's pool
// and reloads the plugin while they run: every result must be exact, no
// call may fail, and every record must be counted once.
func TestHammerReload(t *testing.T) {
	o := wasm.Options{Name: "hammer", Kind: wasm.KindFilter, Path: guest(t, "basic"), PoolSize: 3,
		Config: []byte("version=one"), CacheDir: cacheDir}
	p := load(t, o)
	f, err := p.Filter("A||C")
	if err != nil {
		t.Fatal(err)
	}
	tags := []string{"A", "B", "C", "D"}
	pool := make([]message.Record, 512)
	for i := range pool {
		pool[i] = record(t, tags[i%len(tags)], int64(i), []byte("x"))
	}

	const workers = 8
	iterations := 60
	if testing.Short() {
		iterations = 15
	}
	var (
		wg       sync.WaitGroup
		calls    atomic.Int64
		passed   atomic.Int64
		reloaded = make(chan struct{})
		failures = make(chan error, workers)
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range iterations {
				n := 1 + rng.IntN(600)
				batch := make([]message.Record, n)
				for i := range batch {
					batch[i] = pool[rng.IntN(len(pool))]
				}
				out := make([]bool, n)
				if err := f.Match(batch, out); err != nil {
					failures <- err
					return
				}
				for i, r := range batch {
					tag := r.Properties().Tags()
					if out[i] != (tag == "A" || tag == "C") {
						failures <- errors.New("record with tag " + tag + " got the wrong result")
						return
					}
				}
				passed.Add(int64(n))
				calls.Add(1)
			}
		}()
	}
	go func() {
		defer close(reloaded)
		for calls.Load() < int64(workers*iterations/3) {
			if len(failures) > 0 {
				return
			}
			time.Sleep(time.Millisecond)
		}
		o.Config = []byte("version=two")
		if err := p.Reload(ctx(t), o); err != nil {
			failures <- err
		}
	}()
	wg.Wait()
	<-reloaded
	close(failures)
	for err := range failures {
		t.Fatal(err)
	}
	s := p.Stats()
	if s.Generation != 2 || s.Version != "two" || s.Errors != 0 || s.Records != uint64(passed.Load()) {
		t.Fatalf("stats %+v, %d records passed", s, passed.Load())
	}
}

func TestRegistry(t *testing.T) {
	reg, err := wasm.NewRegistry(wasm.RegistryOptions{CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	basic := guest(t, "basic")
	specs := []wasm.Options{
		{Name: "class", Kind: wasm.KindFilter, ExpressionType: "CLASS", Path: basic},
		{Name: "avg", Kind: wasm.KindAllocate, Path: basic},
	}
	rep, err := reg.Apply(ctx(t), specs)
	if err != nil || strings.Join(rep.Added, ",") != "avg,class" {
		t.Fatalf("first apply: %+v, %v", rep, err)
	}
	class := reg.Plugin("class")
	if reg.Filter("CLASS") != class || class.ExpressionType() != "CLASS" || reg.Filter("class") != nil {
		t.Fatal("expression type lookup")
	}
	f, err := class.Filter("A")
	if err != nil {
		t.Fatal(err)
	}
	batch := records(t, 4, "A", "B")
	if err := f.Match(batch, make([]bool, 4)); err != nil {
		t.Fatal(err)
	}

	rep, err = reg.Apply(ctx(t), specs)
	if err != nil || len(rep.Unchanged) != 2 || len(rep.Reloaded)+len(rep.Added)+len(rep.Removed) != 0 {
		t.Fatalf("same list: %+v, %v", rep, err)
	}

	specs[0].Config = []byte("version=2")
	rep, err = reg.Apply(ctx(t), specs)
	if err != nil || strings.Join(rep.Reloaded, ",") != "class" || reg.Plugin("class") != class ||
		class.Stats().Version != "2" || class.Stats().Generation != 2 {
		t.Fatalf("changed config: %+v, %v, %+v", rep, err, class.Stats())
	}

	// A list with failures changes nothing and names every failing plugin.
	bad := []wasm.Options{
		{Name: "future", Kind: wasm.KindFilter, Path: guest(t, "abiv2")},
		{Name: "class", Kind: wasm.KindFilter, ExpressionType: "CLASS", Path: basic, Config: []byte("version=3")},
		{Name: "avg", Kind: wasm.KindAllocate, Path: basic, SHA256: strings.Repeat("0", 64)},
	}
	_, err = reg.Apply(ctx(t), bad)
	if !errors.Is(err, wasm.ErrABIVersion) || !errors.Is(err, wasm.ErrHash) ||
		!strings.Contains(err.Error(), `"future"`) || !strings.Contains(err.Error(), `"avg"`) {
		t.Fatalf("bad list: %v", err)
	}
	if reg.Plugin("future") != nil || class.Stats().Version != "2" {
		t.Fatal("a failed apply changed the registry")
	}
	_, err = reg.Apply(ctx(t), append(specs, specs[0]))
	if !errors.Is(err, wasm.ErrOptions) || !strings.Contains(err.Error(), "listed twice") {
		t.Fatalf("duplicate: %v", err)
	}
	_, err = reg.Apply(ctx(t), append(specs, wasm.Options{Name: "other", Kind: wasm.KindFilter, ExpressionType: "CLASS", Path: basic}))
	if !errors.Is(err, wasm.ErrOptions) || !strings.Contains(err.Error(), `already served by plugin "class"`) {
		t.Fatalf("two filters for one type: %v", err)
	}

	// Dropping a plugin closes it; changing a plugin's kind replaces it.
	rep, err = reg.Apply(ctx(t), []wasm.Options{{Name: "class", Kind: wasm.KindTxnCheck, Path: basic}})
	if err != nil || strings.Join(rep.Removed, ",") != "avg,class" || strings.Join(rep.Added, ",") != "class" {
		t.Fatalf("replace: %+v, %v", rep, err)
	}
	if reg.Plugin("avg") != nil || reg.Plugin("class").Kind() != wasm.KindTxnCheck {
		t.Fatal("registry content")
	}
	if err := f.Match(batch, make([]bool, 4)); !errors.Is(err, wasm.ErrClosed) {
		t.Fatalf("filter of a replaced plugin: %v", err)
	}
	if st := reg.Stats(); len(st) != 1 || st[0].Name != "class" {
		t.Fatalf("stats: %+v", st)
	}
	if err := reg.Close(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Apply(ctx(t), specs); !errors.Is(err, wasm.ErrClosed) {
		t.Fatalf("apply after close: %v", err)
	}
}

// TestReloadRefused keeps the serving module when the new one fails its
// self-test.
func TestReloadRefused(t *testing.T) {
	o := wasm.Options{Name: "canary", Kind: wasm.KindFilter, Path: guest(t, "basic"), CacheDir: cacheDir}
	p := load(t, o)
	o.Config = []byte("bad-selftest")
	err := p.Reload(ctx(t), o)
	if !errors.Is(err, wasm.ErrSelfTest) || !strings.Contains(err.Error(), "canary") {
		t.Fatalf("reload: %v", err)
	}
	if s := p.Stats(); s.Generation != 1 {
		t.Fatalf("generation %d after a refused reload", s.Generation)
	}
	if _, err := match(t, p, "A", records(t, 2, "A")); err != nil {
		t.Fatal(err)
	}
	o.Kind = wasm.KindAllocate
	if err := p.Reload(ctx(t), o); !errors.Is(err, wasm.ErrOptions) {
		t.Fatalf("kind change: %v", err)
	}
}
