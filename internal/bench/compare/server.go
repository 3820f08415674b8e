package compare

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/rmq-go/rmq/internal/bench/child"
)

// natsReady matches nats-server's
//
//	[32035] 2026/12/01 21:21:44.734301 [INF] Listening for client connections on 127.0.0.1:35671
//	[32035] 2026/12/01 21:21:44.734337 [INF] Server is ready
var natsReady = child.Readiness{
	Addr:  regexp.MustCompile(`Listening for client connections on (\S+)`),
	Ready: regexp.MustCompile(`\] Server is ready`),
}

// server is a server running as a child process on a directory of its own,
// which stop removes.
type server struct {
	*child.Process
	dir string
}

// startServer runs argv in dir (which it takes ownership of: stop, or a
// failed start, removes it) and returns once the server accepts clients.
func startServer(ctx context.Context, name, dir string, argv []string, r child.Readiness) (*server, error) {
	p, err := child.Start(ctx, child.Options{Name: name, Argv: argv, Dir: dir, Ready: r})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &server{Process: p, dir: dir}, nil
}

// stop ends the server, gracefully if it will, and removes its directory.
func (s *server) stop() {
	s.Stop()
	os.RemoveAll(s.dir)
}

// natsConfig is nats-server's configuration for a run: loopback on a port
// the server picks, JetStream with file storage under dir. JetStream's
// default fsync is lazy (every 2 minutes); syncAlways makes it fsync
// every write before acknowledging it.
func natsConfig(dir string, syncAlways bool) string {
	sync := ""
	if syncAlways {
		sync = "\n\tsync_interval: always"
	}
	return fmt.Sprintf("listen: 127.0.0.1:-1\njetstream {\n\tstore_dir: %s%s\n}\n",
		strconv.Quote(filepath.Join(dir, "jetstream")), sync)
}
