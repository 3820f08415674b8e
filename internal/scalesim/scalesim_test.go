package scalesim_test

import (
	"testing"

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
