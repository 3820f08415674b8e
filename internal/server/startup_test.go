package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// gateFS holds up the store's first directory lock until released, as a
// slow recovery or a stuck disk does, or fails it.
type gateFS struct {
	vfs.FS
	entered chan struct{}
	release chan struct{}
	fail    error
	once    sync.Once
}

func (g *gateFS) Lock(name string) (io.Closer, error) {
	g.once.Do(func() { close(g.entered) })
	<-g.release
	if g.fail != nil {
		return nil, g.fail
	}
	return g.FS.Lock(name)
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func refused(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return true
	}
	c.Close()
	return false
}

// TestListenAfterStoreOpens checks that neither port accepts connections
// while the store is still opening, and that a store that fails to open
// stops the start with one error and leaves nothing listening.
func TestListenAfterStoreOpens(t *testing.T) {
	for _, fail := range []error{nil, errors.New("disk on fire")} {
		name := "slow"
		if fail != nil {
			name = "failing"
		}
		t.Run(name, func(t *testing.T) {
			gate := &gateFS{FS: vfs.Default, entered: make(chan struct{}), release: make(chan struct{}), fail: fail}
			cfg := Config{DataDir: t.TempDir(), Listen: freeAddr(t), NamesrvListen: freeAddr(t),
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			cfg.Store.FS = gate
			type result struct {
				s   *Server
				err error
			}
			done := make(chan result, 1)
			go func() {
				s, err := Start(cfg)
				done <- result{s, err}
			}()
			<-gate.entered
			if !refused(cfg.Listen) || !refused(cfg.NamesrvListen) {
				close(gate.release)
				t.Fatal("a port accepts connections before the store is open")
			}
			close(gate.release)
			r := <-done
			if fail != nil {
				if r.err == nil || !strings.Contains(r.err.Error(), "disk on fire") || !strings.Contains(r.err.Error(), "store") {
					t.Fatalf("start with a failing store: %v", r.err)
				}
				if !refused(cfg.Listen) || !refused(cfg.NamesrvListen) {
					t.Fatal("a port listens after a failed start")
				}
				return
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			defer r.s.Shutdown(context.Background())
			if refused(cfg.Listen) {
				t.Fatal("the broker does not listen once started")
			}
		})
	}
}
