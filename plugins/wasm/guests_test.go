package wasm_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rmq-go/rmq/core/message"
)

// guestDir holds the modules the tests build, once per test process, and
// cacheDir their compiled code.
var guestDir, cacheDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wasm-guests-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	guestDir, cacheDir = dir, filepath.Join(dir, "cache")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type guestBuild struct {
	once sync.Once
	path string
	err  error
}

var guests sync.Map // name → *guestBuild

// guest builds testdata/<name> as a wasip1 reactor, once per process, and
// returns the module's path.
func guest(tb testing.TB, name string) string {
	tb.Helper()
	path, err := buildGuest(name)
	if err != nil {
		tb.Fatal(err)
	}
	return path
}

// buildGuest is guest without a testing.TB, for examples.
func buildGuest(name string) (string, error) {
	v, _ := guests.LoadOrStore(name, &guestBuild{})
	b := v.(*guestBuild)
	b.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(guestDir, name+".wasm")
		cmd := exec.Command(goBin, "build", "-buildmode=c-shared", "-o", b.path, "./testdata/"+name)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("building %s: %v\n%s", name, err, out)
		}
	})
	return b.path, b.err
}

// guestBytes returns the module's bytes.
func guestBytes(tb testing.TB, name string) []byte {
	tb.Helper()
	b, err := os.ReadFile(guest(tb, name))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// record builds a stored record with the given tag, offset and body.
func record(tb testing.TB, tag string, offset int64, body []byte) message.Record {
	tb.Helper()
	m := message.Message{
		Topic:          "orders",
		QueueID:        1,
		QueueOffset:    offset,
		StoreTimestamp: 1700000000000 + offset,
		Body:           body,
		Properties:     message.EncodeProperties(map[string]string{"TAGS": tag, "KEYS": "k1 k2", "region": "eu"}),
	}
	b, err := message.AppendRecord(nil, &m)
	if err != nil {
		tb.Fatal(err)
	}
	return message.Record(b)
}

// records builds n records tagged from tags in turn.
func records(tb testing.TB, n int, tags ...string) []message.Record {
	out := make([]message.Record, n)
	for i := range out {
		out[i] = record(tb, tags[i%len(tags)], int64(i), []byte("body"))
	}
	return out
}

func ctx(tb testing.TB) context.Context { return tb.Context() }
