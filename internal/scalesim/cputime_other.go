//go:build !unix

package scalesim

import "time"

// processCPU is zero where getrusage is missing; CPU figures read 0.
func processCPU() time.Duration { return 0 }
