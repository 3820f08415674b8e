package scalesim_test

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/allocate"
	"github.com/rmq-go/rmq/internal/scalesim"
)

// runs is how many times each figure is measured; tables show the median
// and the range.
const runs = 3

// TestScaleSim prints docs/scale.md's tables: the name server at 1, 10,
// 50 and 100 sets of 1,000 topics with 8 queues each, rebalancing 100
// sets' queues among 10, 100 and 1,000 consumers, and raft traffic. It
// takes about 15 s of CPU, so it runs only with RMQ_SCALESIM=1:
//
//	RMQ_SCALESIM=1 go test -count=1 -run TestScaleSim -v ./internal/scalesim
func TestScaleSim(t *testing.T) {
	if os.Getenv("RMQ_SCALESIM") == "" {
		t.Skip("set RMQ_SCALESIM=1 to run the full simulation (about 15 s of CPU)")
	}
	var out strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&out, format+"\n", args...) }

	w("Name server, %d topics on every set, %d queues each (median, range of %d runs)", scalesim.DefaultTopics, scalesim.DefaultQueues, runs)
	w("")
	w("| sets | registration request | CPU per registration (all) | (name server) | route response | CPU per route lookup (all) | (name server) | table heap |")
	w("|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, n := range []int{1, 10, 50, 100} {
		var rs []scalesim.Result
		for range runs {
			r, err := scalesim.Run(scalesim.Options{Sets: n})
			if err != nil {
				t.Fatalf("%d sets: %v", n, err)
			}
			rs = append(rs, r)
		}
		pick := func(f func(scalesim.Result) float64) []float64 {
			var v []float64
			for _, r := range rs {
				v = append(v, f(r))
			}
			return v
		}
		us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
		w("| %d | %s | %s µs | %s µs | %s | %s µs | %s µs | %s |", n,
			bytes(float64(rs[0].RegisterBytes)),
			spread(pick(func(r scalesim.Result) float64 { return us(r.RegisterCPU) }), "%.0f"),
			spread(pick(func(r scalesim.Result) float64 { return us(r.RegisterServerCPU()) }), "%.0f"),
			bytes(float64(rs[0].RouteBytes)),
			spread(pick(func(r scalesim.Result) float64 { return us(r.RouteCPU) }), "%.0f"),
			spread(pick(func(r scalesim.Result) float64 { return us(r.RouteServerCPU()) }), "%.0f"),
			spreadBytes(pick(func(r scalesim.Result) float64 { return float64(r.TableHeap) })))
	}

	const sets, perSet = 100, scalesim.DefaultQueues
	w("")
	w("Rebalance of one topic on %d sets × %d queues (CPU median, range of %d runs)", sets, perSet, runs)
	w("")
	w("| strategy | consumers | CPU per client per rebalance | queues moved, one joins | queues moved, one leaves |")
	w("|---|---:|---:|---:|---:|")
	for _, name := range allocate.Names() {
		s, _ := allocate.ByName(name)
		for _, c := range []int{10, 100, 1000} {
			var cpu []float64
			var last scalesim.Rebalance
			for i := range runs {
				r, err := scalesim.RunRebalance(s, sets, perSet, c, 100*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				if i > 0 && (r.MovedOnJoin != last.MovedOnJoin || r.MovedOnLeave != last.MovedOnLeave) {
					t.Fatalf("%s, %d consumers: moves differ between runs: %+v, %+v", name, c, last, r)
				}
				last = r
				cpu = append(cpu, float64(r.AllocateCPU)/float64(time.Microsecond))
			}
			w("| %s | %d | %s µs | %d of %d | %d of %d |", name, c, spread(cpu, "%.0f"),
				last.MovedOnJoin, last.Queues, last.MovedOnLeave, last.Queues)
		}
	}

	w("")
	w("Raft, 10,000 msgs/s of 1 KiB per set, 3 replicas, heartbeat every %.2f s per follower", scalesim.DefaultHeartbeatInterval)
	w("")
	w("| group-commit rounds/s | msgs per entry | entries/s per set | leader sends per set | each follower receives | AppendEntries/s per set | heartbeats/s per set | leader sends, 100 sets | entries/s, 100 sets |")
	w("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, rounds := range []float64{100, 500, 1000} {
		one := scalesim.RaftModel{MsgsPerSec: 10_000, MsgBytes: 1024, Replicas: 3, RoundsPerSec: rounds}.PerSet()
		all := one.Sets(100)
		w("| %.0f | %.0f | %.0f | %s/s | %s/s | %.0f | %.1f | %s/s | %.0f |", rounds, one.MsgsPerEntry, one.EntriesPerSec,
			mb(one.LeaderOutBytes), mb(one.FollowerInBytes), one.AppendRPCsPerSec, one.HeartbeatsPerSec,
			mb(all.LeaderOutBytes), all.EntriesPerSec)
	}
	fmt.Print(out.String())
}

// spread formats the median of v and its range, "m (lo–hi)".
func spread(v []float64, f string) string {
	s := slices.Clone(v)
	slices.Sort(s)
	return fmt.Sprintf(f+" ("+f+"–"+f+")", s[len(s)/2], s[0], s[len(s)-1])
}

// spreadBytes is spread for byte counts.
func spreadBytes(v []float64) string {
	s := slices.Clone(v)
	slices.Sort(s)
	return fmt.Sprintf("%s (%s–%s)", bytes(s[len(s)/2]), bytes(s[0]), bytes(s[len(s)-1]))
}

// bytes writes n in B, KiB or MiB.
func bytes(n float64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0f B", n)
}

// mb writes a rate in MB (10^6 bytes), as network links are counted.
func mb(n float64) string { return fmt.Sprintf("%.1f MB", n/1e6) }
