//go:build !wasip1

package sdk

import (
	"fmt"
	"os"
)

// hostLog writes to stderr when the package runs natively, as in an
// author's unit tests.
func hostLog(level Level, msg string) { fmt.Fprintf(os.Stderr, "plugin log %d: %s\n", level, msg) }
