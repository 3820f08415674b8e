package grpcserver

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
)

// TestPollTime: a receive waits what it asks for, within the server's
// longest, and answers before its call's deadline: 200 ms before when it
// named its long polling time, 1.5 s before when it named none (the Go
// simple consumer's, whose deadline is its await plus a 3 s request
// timeout), and 200 ms before when the call is too short for that.
func TestPollTime(t *testing.T) {
	const longest = 20 * time.Second
	d := durationpb.New
	for _, c := range []struct {
		asked       *durationpb.Duration
		remaining   time.Duration
		hasDeadline bool
		want        time.Duration
	}{
		{nil, 0, false, longest},
		{d(5 * time.Second), 0, false, 5 * time.Second},
		{d(time.Minute), 0, false, longest},
		{d(-time.Second), 0, false, 0},
		{d(5 * time.Second), 30 * time.Second, true, 5 * time.Second},
		{d(5 * time.Second), 5 * time.Second, true, 4800 * time.Millisecond},
		{nil, 13 * time.Second, true, 11500 * time.Millisecond}, // Go: await 10 s + 3 s
		{nil, time.Minute, true, longest},
		{nil, time.Second, true, 800 * time.Millisecond},
		{nil, 100 * time.Millisecond, true, 0},
	} {
		if got := pollTime(c.asked, longest, c.remaining, c.hasDeadline); got != c.want {
			t.Errorf("asked %v, %v left (deadline %v): %v, want %v", c.asked.AsDuration(), c.remaining, c.hasDeadline, got, c.want)
		}
	}
}
