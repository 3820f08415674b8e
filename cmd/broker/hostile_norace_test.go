//go:build !race

package main

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/internal/bench/memory"
)

// Bounds of TestHostileClientsMemory.
const (
	// hostilePeakBound is the most the broker's peak resident memory
	// (VmHWM) may reach during any one attack.
	hostilePeakBound = 256 << 20
	// hostileSlowdown is how much the well-behaved sender's p99 may grow
	// during an attack, against its p99 just before.
	hostileSlowdown = 3
	// hostileLatencyFloor is the least baseline the slowdown is taken
	// against: below it a send's p99 on a shared two-core machine is
	// scheduling noise (one context switch, one GC), not the broker's
	// work.
	hostileLatencyFloor = 2 * time.Millisecond
)

// TestHostileClientsMemory starts the broker as a process of its own for
// each attack of `broker bench hostile` (40 connections stalled in 16 MiB
// frames, 3,000 unread 1 MiB pulls on one connection, a frame trickled a
// byte per 100 ms, 5,000 idle connections), with its default limits, and
// checks that its peak resident memory stays under 256 MiB, that the
// trickled frame is dropped at the frame deadline, and that a sender on a
// connection of its own keeps working at a p99 within 3× of its own
// before the attack. The broker runs with --flush async, so the sender's
// latency is the broker's work and not the disk's fsync. It is built
// without the race detector, which multiplies memory.
func TestHostileClientsMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("resource test: a minute of hostile load")
	}
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc and dials from several loopback addresses: Linux only")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var log strings.Builder
	rep, err := memory.Hostile(ctx, memory.HostileOptions{
		Broker:  os.Args[0],
		Env:     []string{"RMQ_BROKER_CHILD=1"},
		Args:    []string{"--flush", "async"},
		TempDir: t.TempDir(),
	}, &log)
	t.Logf("\n%s\n%s", log.String(), rep)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Stages) != 4 {
		t.Fatalf("%d stages, want 4", len(rep.Stages))
	}
	for _, s := range rep.Stages {
		if s.After.HWM > hostilePeakBound {
			t.Errorf("%s: the broker's peak RSS reached %d MiB, over %d MiB", s.Name, s.After.HWM>>20, hostilePeakBound>>20)
		}
		if s.Sends == 0 || s.Failed > 0 {
			t.Errorf("%s: the well-behaved sender made %d sends, %d of them failed", s.Name, s.Sends, s.Failed)
		}
		if limit := hostileSlowdown * max(s.BaselineP99, hostileLatencyFloor); s.P99 > limit {
			t.Errorf("%s: the well-behaved sender's p99 was %v, over %v (%d× its %v before, at least %v)",
				s.Name, s.P99, limit, hostileSlowdown, s.BaselineP99, hostileLatencyFloor)
		}
	}
	if trickle := rep.Stages[2]; trickle.Closed == 0 || trickle.Closed > 15*time.Second {
		t.Errorf("the trickled frame's connection was closed after %v, want within the 10 s frame deadline", trickle.Closed)
	}
}
