//go:build !race

package server_test

import "testing"

// hostileRSSBound is the resident memory the whole test process (broker,
// attackers and well-behaved clients) may reach during the attack, with
// the broker's default limits. Observed: 300–360 MiB.
const hostileRSSBound = 512 << 20

// TestHostileWorkloadsRSS runs the hostile workloads again without the
// race detector, which multiplies memory, and bounds the process's RSS.
// .ci/run runs it so.
func TestHostileWorkloadsRSS(t *testing.T) { hostileWorkloads(t, hostileRSSBound) }
