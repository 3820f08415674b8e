package compare

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// The programs compare runs for JetStream, built from source with
// `go install` at pinned versions.
const (
	// NatsServerModule is nats-server's module.
	NatsServerModule = "github.com/nats-io/nats-server/v2"
	natsServerPkg    = NatsServerModule
	// DefaultNatsServerVersion is the nats-server version compare
	// installs: the one go.mod requires for the NATS bridge's tests, which
	// embed it. A test keeps the two equal; the binary cannot read go.mod,
	// and its build information does not list a module only tests use.
	DefaultNatsServerVersion = "v2.15.2"
	// NatsCLIModule is the module of the nats CLI, whose `nats bench` is
	// JetStream's load generator.
	NatsCLIModule = "github.com/nats-io/natscli"
	natsCLIPkg    = NatsCLIModule + "/nats"
	// DefaultNatsCLIVersion is the nats CLI version compare installs.
	// v0.5.0 is the first whose `nats bench js pub` has --throughput and
	// --duration and the fast batch publisher.
	DefaultNatsCLIVersion = "v0.5.0"
)

// tool is one program compare installs.
type tool struct {
	module, pkg, version string
	bin                  string // the file go install writes
}

// path is where the tool lives in cacheDir: a directory per program and
// version (nats-server@v2.15.2), so versions sit side by side.
func (t tool) path(cacheDir string) string {
	return filepath.Join(cacheDir, t.bin+"@"+t.version, t.bin)
}

// installed reports whether path holds a Go binary of the tool's module at
// its version.
func (t tool) installed(path string) bool {
	info, err := buildinfo.ReadFile(path)
	return err == nil && info.Main.Path == t.module && info.Main.Version == t.version
}

// ensure returns the path of the tool's binary under cacheDir, first
// building it with `go install pkg@version` unless a binary of that
// module and version is already there. It says what it does on log.
func (t tool) ensure(ctx context.Context, goCmd, cacheDir string, log io.Writer) (string, error) {
	path := t.path(cacheDir)
	if t.installed(path) {
		return path, nil
	}
	fmt.Fprintf(log, "installing %s@%s into %s (once per version; this takes a while)\n", t.pkg, t.version, filepath.Dir(path))
	cmd := exec.CommandContext(ctx, goCmd, "install", t.pkg+"@"+t.version)
	// GOBIN puts the binary in the cache; go install @version builds
	// with the tool's own go.mod, as its releases are built, whatever
	// module the current directory is in.
	cmd.Env = append(os.Environ(), "GOBIN="+filepath.Dir(path))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: go install %s@%s: %v: %s", ErrInstall, t.pkg, t.version, err, lastLines(out.Bytes(), 10))
	}
	if !t.installed(path) {
		return "", fmt.Errorf("%w: go install %s@%s left no such binary at %s", ErrInstall, t.pkg, t.version, path)
	}
	return path, nil
}
