package store_test

import (
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/core/store/storetest"
)

func quietLogger() *slog.Logger {
	if os.Getenv("STORE_DEBUG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func TestContract(t *testing.T) {
	for _, flush := range []store.FlushMode{store.FlushSync, store.FlushAsync} {
		t.Run("fs=os/flush="+flush.String(), func(t *testing.T) {
			storetest.Run(t, storetest.Config{Options: func(t testing.TB) store.Options {
				return store.Options{Dir: t.TempDir(), Flush: flush, Logger: quietLogger()}
			}})
		})
		t.Run("fs=os/prealloc/flush="+flush.String(), func(t *testing.T) {
			storetest.Run(t, storetest.Config{Options: func(t testing.TB) store.Options {
				return store.Options{Dir: t.TempDir(), Flush: flush, Prealloc: 1 << 20, Logger: quietLogger()}
			}})
		})
		t.Run("fs=mem/flush="+flush.String(), func(t *testing.T) {
			storetest.Run(t, storetest.Config{Options: func(t testing.TB) store.Options {
				return store.Options{Dir: "/data", FS: vfs.NewCrashableMem(), Flush: flush, Logger: quietLogger()}
			}})
		})
	}
}

func runtimeYield() { runtime.Gosched() }

func slicesSort(d []time.Duration) { slices.Sort(d) }
