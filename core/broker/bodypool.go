package broker

import (
	"math/bits"
	"sync"
)

// Pull bodies are the broker's largest allocations: a pull of 32 messages
// of 1 KiB is a 33 KiB buffer, zeroed by the allocator and garbage once
// the connection has copied or written it. They are pooled by size class,
// powers of two from 16 KiB to 4 MiB, and handed back through the
// response's remoting.Command.ReleaseBody. Smaller bodies are cheap enough
// to allocate, larger ones rare enough.
const (
	bodyClassMinShift = 14 // 16 KiB
	bodyClasses       = 9  // up to 4 MiB
)

var pullBodies [bodyClasses]sync.Pool // of *[]byte, each of its class's capacity

// bodyClass returns the class of a body of capacity n, or -1.
func bodyClass(n int) int {
	if n <= 1<<(bodyClassMinShift-1) {
		return -1
	}
	k := max(bits.Len(uint(n-1))-bodyClassMinShift, 0)
	if k >= bodyClasses {
		return -1
	}
	return k
}

// newPullBody returns an empty buffer of capacity at least n.
func newPullBody(n int) []byte {
	k := bodyClass(n)
	if k < 0 {
		return make([]byte, 0, n)
	}
	if v, ok := pullBodies[k].Get().(*[]byte); ok {
		return (*v)[:0]
	}
	return make([]byte, 0, 1<<(bodyClassMinShift+k))
}

// releasePullBody returns a body from newPullBody to its pool; others,
// and bodies that grew past their class, are left to the collector.
func releasePullBody(b []byte) {
	k := bodyClass(cap(b))
	if k < 0 || cap(b) != 1<<(bodyClassMinShift+k) {
		return
	}
	b = b[:0]
	pullBodies[k].Put(&b)
}
