package grpcserver

import (
	"strings"
	"sync"
	"sync/atomic"

	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// maxCountKeys bounds the pairs of method and code counted apart; the
// service has about 20 methods and answers with a few dozen codes, so
// the bound is never reached unless that changes.
const maxCountKeys = 1024

// Counts counts the service's responses by method and Status code, for
// the broker's metrics (rmq_grpc_responses_total). One Counts may serve
// several Servers in turn (a replicated set's member makes one per role),
// so its counts last as long as the process. It is safe for concurrent
// use.
type Counts struct {
	m    sync.Map // countKey → *atomic.Int64
	size atomic.Int64
}

type countKey struct {
	method string
	code   pb.Code
}

// NewCounts returns empty counts.
func NewCounts() *Counts { return &Counts{} }

// add counts one response of the method named by a gRPC full method
// name ("/apache.rocketmq.v2.MessagingService/SendMessage").
func (c *Counts) add(fullMethod string, code pb.Code) {
	k := countKey{method: fullMethod[strings.LastIndexByte(fullMethod, '/')+1:], code: code}
	v, ok := c.m.Load(k)
	if !ok {
		if c.size.Load() >= maxCountKeys {
			k = countKey{method: "_other", code: code}
		}
		var loaded bool
		if v, loaded = c.m.LoadOrStore(k, new(atomic.Int64)); !loaded {
			c.size.Add(1)
		}
	}
	v.(*atomic.Int64).Add(1)
}

// Each calls fn with every method, code name and count so far.
func (c *Counts) Each(fn func(method, code string, n int64)) {
	c.m.Range(func(k, v any) bool {
		ck := k.(countKey)
		fn(ck.method, ck.code.String(), v.(*atomic.Int64).Load())
		return true
	})
}
