package sql92

import (
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestMemSizeTracksHeap checks that MemSize is within a factor of two of
// what a compiled expression really keeps on the heap, for the shapes that
// cost the most per source byte: long OR chains and long IN lists.
func TestMemSizeTracksHeap(t *testing.T) {
	var or, in strings.Builder
	for i := 0; or.Len() < MaxExprLen-32; i++ {
		if i > 0 {
			or.WriteString(" OR ")
		}
		or.WriteString("a=" + strconv.Itoa(i%10))
	}
	in.WriteString("a IN (")
	for i := 0; in.Len() < MaxExprLen-32; i++ {
		if i > 0 {
			in.WriteString(",")
		}
		in.WriteString("'" + strconv.Itoa(i) + "'")
	}
	in.WriteString(")")
	for name, src := range map[string]string{"or": or.String(), "in": in.String()} {
		t.Run(name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			e, err := Compile(src)
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			heap := int(after.HeapAlloc) - int(before.HeapAlloc)
			got := e.MemSize()
			runtime.KeepAlive(e)
			t.Logf("%d source bytes: MemSize %d, heap %d", len(src), got, heap)
			if got < heap/2 || got > heap*2 {
				t.Fatalf("MemSize %d is not within 2x of the heap it holds (%d)", got, heap)
			}
		})
	}
}
