package tag

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/message"
)

func BenchmarkMatchTagHash(b *testing.B) {
	for _, n := range []int{1, 3, 32} {
		tags := make([]string, n)
		for i := range tags {
			tags[i] = "Tag" + strconv.Itoa(i)
		}
		f, err := Compile(strings.Join(tags, " || "))
		if err != nil {
			b.Fatal(err)
		}
		// Half the probes hit, half miss.
		probes := []int64{message.TagHash(tags[n-1]), message.TagHash("Other")}
		b.Run("tags="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			hits := 0
			for i := 0; b.Loop(); i++ {
				if f.MatchTagHash(probes[i&1]) {
					hits++
				}
			}
			if hits == 0 {
				b.Fatal("no hits")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/entry")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}
