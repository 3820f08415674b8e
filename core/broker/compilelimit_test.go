package broker

import (
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
)

// nopFilter matches everything.
type nopFilter struct{}

func (nopFilter) MatchTagHash(int64) bool                  { return true }
func (nopFilter) NeedsRecord() bool                        { return false }
func (nopFilter) Match(_ []message.Record, _ []bool) error { return nil }

// TestSQL92CompilesBoundedByCPUs compiles many distinct SQL92 expressions
// at once, as one connection's pulls in flight can: no more compiles run
// at a time than GOMAXPROCS, since each one in progress holds its partial
// tree.
func TestSQL92CompilesBoundedByCPUs(t *testing.T) {
	limit := runtime.GOMAXPROCS(0)
	var running, peak atomic.Int64
	release := make(chan struct{})
	factory := FilterFactoryFunc(func(expr string) (Filter, error) {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		<-release
		running.Add(-1)
		return nopFilter{}, nil
	})
	c := newFilterCache(slog.Default(), map[string]FilterFactory{ExpressionSQL92: factory},
		filterCacheLimits{count: DefaultFilterCacheSize, bytes: DefaultFilterCacheBytes, exprLen: DefaultMaxFilterExpr})
	var wg sync.WaitGroup
	for i := range 4 * limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.compile(ExpressionSQL92, "a = "+strconv.Itoa(i)); err != nil {
				t.Error(err)
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for running.Load() < int64(limit) {
		if time.Now().After(deadline) {
			t.Fatalf("%d compiles running, want %d", running.Load(), limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	if p := peak.Load(); p != int64(limit) {
		t.Fatalf("%d compiles ran at once, want at most GOMAXPROCS = %d", p, limit)
	}
}
