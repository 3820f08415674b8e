package scalesim_test

import (
	"math"
	"testing"

	"github.com/rmq-go/rmq/core/allocate"
	"github.com/rmq-go/rmq/internal/scalesim"
)

// TestRouteGrowsLinearly runs the name-server harness at 1, 2 and 4 sets,
// small: each route names every set's queues (Run checks it), every set
// adds the same bytes to a route, and a registration does not depend on
// how many sets there are.
func TestRouteGrowsLinearly(t *testing.T) {
	var rs []scalesim.Result
	for _, n := range []int{1, 2, 4} {
		r, err := scalesim.Run(scalesim.Options{Sets: n, Topics: 50, Registrations: 20, RouteQueries: 50})
		if err != nil {
			t.Fatalf("%d sets: %v", n, err)
		}
		t.Logf("%d sets: register %d B, route %d B, table heap %d B", n, r.RegisterBytes, r.RouteBytes, r.TableHeap)
		rs = append(rs, r)
	}
	perSet := rs[1].RouteBytes - rs[0].RouteBytes
	if perSet <= 0 || rs[2].RouteBytes-rs[1].RouteBytes != 2*perSet {
		t.Fatalf("route bytes at 1, 2, 4 sets: %d, %d, %d; want equal steps per set", rs[0].RouteBytes, rs[1].RouteBytes, rs[2].RouteBytes)
	}
	if rs[0].RegisterBytes != rs[2].RegisterBytes {
		t.Fatalf("a registration is %d B at 1 set and %d B at 4", rs[0].RegisterBytes, rs[2].RegisterBytes)
	}
}

// TestMovedShortcut checks that Moved's shortcut for CONSISTENT_HASH
// (ask only the client that joined or left) counts what comparing both
// allocations in full counts, and that the other strategies are counted
// in full.
func TestMovedShortcut(t *testing.T) {
	qs := scalesim.RebalanceQueues(10, 8)
	for _, n := range []int{3, 10, 100} {
		clients := make([]string, n)
		for i := range clients {
			clients[i] = scalesim.ClientID(i)
		}
		joined := append(clients[:n:n], "c-join")
		left := clients[1:]
		for _, name := range allocate.Names() {
			s, _ := allocate.ByName(name)
			for _, after := range [][]string{joined, left} {
				got, err := scalesim.Moved(s, clients, after, qs)
				if err != nil {
					t.Fatal(err)
				}
				want, err := scalesim.MovedFull(s, clients, after, qs)
				if err != nil {
					t.Fatal(err)
				}
				if got != want || got > len(qs) {
					t.Errorf("%s, %d clients to %d: Moved %d, MovedFull %d", name, n, len(after), got, want)
				}
			}
		}
	}
}

// TestRaftModel checks the replication arithmetic on the plan's case:
// 10,000 messages of 1 KiB per second, three replicas.
func TestRaftModel(t *testing.T) {
	set := scalesim.RaftModel{MsgsPerSec: 10_000, MsgBytes: 1024, Replicas: 3, RoundsPerSec: 500}.PerSet()
	if set.LeaderOutBytes != 20_480_000 || set.FollowerInBytes != 10_240_000 || set.MsgsPerEntry != 20 ||
		set.AppendRPCsPerSec != 1000 || math.Abs(set.HeartbeatsPerSec-2/0.15) > 1e-9 {
		t.Fatalf("one set: %+v", set)
	}
	all := set.Sets(100)
	if all.LeaderOutBytes != 100*set.LeaderOutBytes || all.FollowerInBytes != set.FollowerInBytes || all.EntriesPerSec != 50_000 {
		t.Fatalf("100 sets: %+v", all)
	}
}
