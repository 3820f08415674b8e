package remoting

import (
	"bytes"
	"math/bits"
	"sync"
)

// Received bodies outlive the frame buffer they were read into, so a
// Client copies each response's body out of it. A consumer pulling
// backlog receives one large body per pull, and with nothing reused each
// became garbage at once: the allocations and the collections they caused
// cost the puller more than reading the bodies did. A body of a size worth
// reusing is therefore copied into a buffer from a pool of powers of two,
// which Command.Recycle gives back once its reader is done with it.

const (
	// minPooledBody and maxPooledBody bound the bodies copied into pooled
	// buffers; smaller ones cost little to allocate, larger ones are rare
	// and would pin much memory in the pool.
	minPooledBody = 4 << 10
	maxPooledBody = 4 << 20
	// bodyClasses is the number of buffer sizes, minPooledBody to
	// maxPooledBody by powers of two.
	bodyClasses = 11
)

// bodyPools holds the buffers of each size class, as *[]byte.
var bodyPools [bodyClasses]sync.Pool

// bodyClass returns the class of the smallest buffer that holds n bytes,
// for minPooledBody/2 < n ≤ maxPooledBody.
func bodyClass(n int) int {
	return max(0, bits.Len(uint(n-1))-bits.Len(uint(minPooledBody-1)))
}

// copyBody returns a copy of b that does not alias it, in a pooled buffer
// when b's size is worth one; the buffer is returned too, or nil.
func copyBody(b []byte) ([]byte, *[]byte) {
	if len(b) < minPooledBody || len(b) > maxPooledBody {
		return bytes.Clone(b), nil
	}
	k := bodyClass(len(b))
	p, _ := bodyPools[k].Get().(*[]byte)
	if p == nil {
		buf := make([]byte, minPooledBody<<k)
		p = &buf
	}
	out := (*p)[:len(b)]
	copy(out, b)
	return out, p
}

// Recycle sets Body to nil and gives the buffer that held it back for
// reuse by later responses. Call it on a response a Client received, once
// nothing refers to Body, or to any slice of it, any more: the bytes will
// be overwritten. A body that was not pooled (a small one, a request's, a
// command built by hand) is left to the garbage collector. Call it at most
// once for each command received, and not on a copy of the command as
// well.
func (c *Command) Recycle() {
	p := c.pooled
	c.pooled, c.Body = nil, nil
	if p != nil {
		bodyPools[bodyClass(cap(*p))].Put(p)
	}
}
