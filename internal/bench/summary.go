package bench

import (
	"fmt"
	"strings"
	"time"
)

// Summary is the outcome of a run. Latencies are per request, from sending
// it to reading its response, over the requests that got one (error codes
// included).
type Summary struct {
	Messages   int64         // messages the broker acknowledged (Produce) or returned (Consume)
	Bytes      int64         // body bytes of those messages
	Requests   int64         // requests answered or failed
	Errors     int64         // requests failed: an error code, a timeout, a lost connection
	Elapsed    time.Duration // from the first request to the last response
	MsgsPerSec float64       // Messages per second of Elapsed
	MBPerSec   float64       // Bytes per second of Elapsed, in 10^6 bytes
	P50        time.Duration // median latency
	P90        time.Duration
	P99        time.Duration
	P999       time.Duration // 99.9th percentile
	Max        time.Duration // slowest response, exact
	// BrokerCPU is the CPU time, user plus system, the broker process used
	// over Elapsed, and BrokerCPUPerMsg that divided by Messages; both 0
	// unless Options.BrokerPID is set. The resolution is 10 ms.
	BrokerCPU       time.Duration
	BrokerCPUPerMsg time.Duration
	// ErrorSamples holds the first few distinct error texts, at most five.
	ErrorSamples []string
}

// String formats s as a block of lines, the last ending in a newline.
func (s Summary) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "messages  %d in %v: %.0f msgs/s, %.2f MB/s\n", s.Messages, short(s.Elapsed), s.MsgsPerSec, s.MBPerSec)
	fmt.Fprintf(&b, "requests  %d, %d errors\n", s.Requests, s.Errors)
	fmt.Fprintf(&b, "latency   p50 %v  p90 %v  p99 %v  p99.9 %v  max %v\n",
		short(s.P50), short(s.P90), short(s.P99), short(s.P999), short(s.Max))
	if s.BrokerCPU > 0 {
		fmt.Fprintf(&b, "broker    cpu %v, %v per message\n", short(s.BrokerCPU), short(s.BrokerCPUPerMsg))
	}
	for _, e := range s.ErrorSamples {
		fmt.Fprintf(&b, "error     %s\n", e)
	}
	return b.String()
}
