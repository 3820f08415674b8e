package main

import (
	"strings"
	"testing"

	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestAdminConsumersStrategy sets, shows and clears a group's strategy
// with "broker admin consumers strategy".
func TestAdminConsumersStrategy(t *testing.T) {
	env := brokertest.Start(t)
	group := brokertest.Name("cg")
	admin := func(args ...string) (int, string, string) {
		return runCmd(append([]string{"admin", "--broker", env.BrokerAddr, "consumers", "strategy"}, args...)...)
	}
	if code, out, errs := admin("--group", group); code != 0 || !strings.Contains(out, "configured (none); assignments use AVG (default)") {
		t.Fatalf("show: %d %q %q", code, out, errs)
	}
	if code, out, errs := admin("--group", group, "--strategy", "consistent_hash"); code != 0 || !strings.Contains(out, "configured CONSISTENT_HASH; assignments use CONSISTENT_HASH (group)") {
		t.Fatalf("set: %d %q %q", code, out, errs)
	}
	env = env.Restart(t) // durable
	if gs := env.Broker.View().GroupStrategy(group); gs.Configured != "CONSISTENT_HASH" {
		t.Fatalf("after set and restart: %+v", gs)
	}
	if code, _, errs := admin("--group", group, "--strategy", "RANDOM"); code != 1 || !strings.Contains(errs, `"RANDOM" is not one of AVG, AVG_BY_CIRCLE, CONSISTENT_HASH`) {
		t.Fatalf("bad name: %d %q", code, errs)
	}
	if code, out, errs := admin("--group", group, "--clear"); code != 0 || !strings.Contains(out, "configured (none)") {
		t.Fatalf("clear: %d %q %q", code, out, errs)
	}
	if code, _, errs := admin(); code != 2 || !strings.Contains(errs, "--group required") {
		t.Fatalf("no group: %d %q", code, errs)
	}
}
