package compare

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/internal/bench/child"
)

func TestNatsReady(t *testing.T) {
	addr := "[32035] 2026/12/01 21:21:44.734301 [INF] Listening for client connections on 127.0.0.1:35671"
	ready := "[32035] 2026/12/01 21:21:44.734337 [INF] Server is ready"
	if m := natsReady.Addr.FindStringSubmatch(addr); m == nil || m[1] != "127.0.0.1:35671" {
		t.Errorf("address line gives %q, want 127.0.0.1:35671", m)
	}
	if !natsReady.Ready.MatchString(ready) || natsReady.Ready.MatchString(addr) {
		t.Errorf("the ready pattern must match only the ready line")
	}
}

func TestNatsConfig(t *testing.T) {
	lazy, always := natsConfig("/tmp/x", false), natsConfig("/tmp/x", true)
	for _, c := range []string{lazy, always} {
		if !strings.Contains(c, "listen: 127.0.0.1:-1\n") || !strings.Contains(c, `store_dir: "/tmp/x/jetstream"`) {
			t.Errorf("config lacks the listener or the store:\n%s", c)
		}
	}
	if strings.Contains(lazy, "sync_interval") || !strings.Contains(always, "sync_interval: always") {
		t.Errorf("sync_interval: lazy config\n%s\nalways config\n%s", lazy, always)
	}
}

func TestStartServerRemovesDirOnFailure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "srv")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := startServer(context.Background(), "broker", dir, []string{filepath.Join(dir, "no-such-broker")}, child.BrokerReady)
	if !errors.Is(err, ErrServer) {
		t.Errorf("start of a missing program: %v, want ErrServer", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the directory is still there after a failed start: %v", err)
	}
}
