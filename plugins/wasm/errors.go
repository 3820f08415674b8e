package wasm

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of this package. Every error a Plugin returns is an *Error naming
// the plugin and wrapping one of these; compare with errors.Is.
var (
	// ErrOptions is returned for Options that cannot describe a plugin.
	ErrOptions = errors.New("wasm: invalid options")
	// ErrModule is returned for a module that cannot be read, is too large,
	// does not compile, or lacks an export or has an import the ABI requires
	// or forbids.
	ErrModule = errors.New("wasm: invalid module")
	// ErrABIVersion is returned for a module built for another ABI version.
	ErrABIVersion = errors.New("wasm: wrong ABI version")
	// ErrHash is returned when the module's sha256 is not the expected one.
	ErrHash = errors.New("wasm: sha256 mismatch")
	// ErrKind is returned when the module does not serve the plugin's kind,
	// or a method of another kind is called.
	ErrKind = errors.New("wasm: kind not served")
	// ErrInit is returned when an instance cannot start: instantiation or
	// broker_init failed.
	ErrInit = errors.New("wasm: init failed")
	// ErrSelfTest is returned when a new module fails its own self-test
	// vectors.
	ErrSelfTest = errors.New("wasm: self-test failed")
	// ErrTrap is returned when a call trapped (a Go panic, an out-of-memory
	// exit, a wasm trap). The instance is discarded.
	ErrTrap = errors.New("wasm: trapped")
	// ErrTimeout is returned when an untrusted plugin's call ran past its
	// deadline. The instance is discarded.
	ErrTimeout = errors.New("wasm: deadline exceeded")
	// ErrDisabled is returned by every call after MaxFailures traps or
	// timeouts in a row, until the plugin is reloaded.
	ErrDisabled = errors.New("wasm: disabled after repeated failures")
	// ErrExpression is returned when a filter rejects its expression.
	ErrExpression = errors.New("wasm: expression rejected")
	// ErrFailed is returned when the plugin's code reported an error.
	ErrFailed = errors.New("wasm: plugin reported an error")
	// ErrOutput is returned when a module's output breaks the ABI.
	ErrOutput = errors.New("wasm: malformed output")
	// ErrClosed is returned by calls on a closed plugin.
	ErrClosed = errors.New("wasm: plugin closed")
)

// Error is a failed plugin operation.
type Error struct {
	Plugin string // the plugin's name
	Op     string // load, reload, filter, allocate, txncheck, apply
	Err    error  // wraps one of the package's sentinels
	// Stderr is what the instance wrote to stderr during the failed call:
	// its first KiB and its last 3 KiB. For a Go guest it holds the panic
	// or fatal error and the goroutine traces.
	Stderr string
}

// Error formats e with the plugin's name first and the opening lines of
// Stderr (a Go panic's message) last.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plugin %q: %s: %v", e.Plugin, e.Op, e.Err)
	if s := headline(e.Stderr); s != "" {
		b.WriteString("; stderr: ")
		b.WriteString(s)
	}
	return b.String()
}

// headline returns the first paragraph of stderr (at most 3 lines) joined
// into one line: "panic: ..." or "runtime: ...; fatal error: ...".
func headline(stderr string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || len(lines) == 3 {
			break
		}
		lines = append(lines, l)
	}
	return strings.Join(lines, "; ")
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// wrapf makes an error wrapping sentinel with a detail.
func wrapf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}
