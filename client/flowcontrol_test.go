package client

import (
	"strings"
	"testing"
	"time"
)

// flowQueue returns a queue holding n messages of bodySize bytes at
// offsets first, first+1, ... and, if last > first+n-1, one more at last.
func flowQueue(n int, bodySize int, first, last int64) *processQueue {
	pq := newProcessQueue(false, pqT0)
	msgs := make([]*MessageExt, 0, n+1)
	for i := range n {
		msgs = append(msgs, &MessageExt{QueueOffset: first + int64(i), Message: Message{Body: make([]byte, bodySize)}})
	}
	if last > first+int64(n)-1 {
		msgs = append(msgs, &MessageExt{QueueOffset: last})
	}
	pq.put(msgs)
	return pq
}

func TestFlowControlBoundaries(t *testing.T) {
	cases := []struct {
		name        string
		limits      flowLimits
		pq          *processQueue
		topicQueues int
		orderly     bool
		want        flowReason
	}{
		{"1000 messages pass", flowLimits{}, flowQueue(1000, 1, 0, 0), 4, false, flowOK},
		{"1001 messages wait", flowLimits{}, flowQueue(1001, 1, 0, 0), 4, false, flowQueueCount},
		{"100 MiB passes", flowLimits{}, flowQueue(100, 1<<20, 0, 0), 1, false, flowOK},
		{"100 MiB + 1 byte waits", flowLimits{queueCount: 1000}, flowAddOne(flowQueue(100, 1<<20, 0, 99), 1), 1, false, flowQueueSize},
		{"span 2000 passes", flowLimits{}, flowQueue(1, 1, 0, 2000), 1, false, flowOK},
		{"span 2001 waits", flowLimits{}, flowQueue(1, 1, 0, 2001), 1, false, flowSpan},
		{"span ignored when orderly", flowLimits{}, flowQueue(1, 1, 0, 5000), 1, true, flowOK},
		{"count checked before size", flowLimits{queueCount: 2, queueSize: 2}, flowQueue(3, 1, 0, 0), 1, false, flowQueueCount},
		{"topic count split: 100/4 = 25 passes", flowLimits{topicCount: 100}, flowQueue(25, 1, 0, 0), 4, false, flowOK},
		{"topic count split: 26 waits", flowLimits{topicCount: 100}, flowQueue(26, 1, 0, 0), 4, false, flowTopicCount},
		{"topic count replaces a smaller queue limit", flowLimits{queueCount: 10, topicCount: 100}, flowQueue(25, 1, 0, 0), 4, false, flowOK},
		{"topic count at least 1", flowLimits{topicCount: 3}, flowQueue(1, 1, 0, 0), 4, false, flowOK},
		{"topic count at least 1: 2 waits", flowLimits{topicCount: 3}, flowQueue(2, 1, 0, 0), 4, false, flowTopicCount},
		{"topic size split: 1000/10 = 100 passes", flowLimits{topicSize: 1000}, flowQueue(10, 10, 0, 0), 10, false, flowOK},
		{"topic size split: 101 waits", flowLimits{topicSize: 1000}, flowAddOne(flowQueue(10, 10, 0, 0), 1), 10, false, flowTopicSize},
		{"no assigned queues: topic limits unused", flowLimits{topicCount: 4}, flowQueue(10, 1, 0, 0), 0, false, flowOK},
		{"unlimited topic", flowLimits{topicCount: -1, topicSize: -1}, flowQueue(1000, 1, 0, 0), 1000, false, flowOK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fc, err := newFlowControl(tc.limits)
			if err != nil {
				t.Fatal(err)
			}
			delay, reason := fc.check(tc.pq, tc.topicQueues, tc.orderly)
			if reason != tc.want {
				t.Fatalf("reason %v, want %v (count %d size %d span %d)", reason, tc.want, tc.pq.count(), tc.pq.size(), tc.pq.span())
			}
			wantDelay := time.Duration(0)
			if tc.want != flowOK {
				wantDelay = 50 * time.Millisecond
			}
			if delay != wantDelay {
				t.Fatalf("delay %v, want %v", delay, wantDelay)
			}
			for r := flowOK; r < numFlowReasons; r++ {
				want := int64(0)
				if r == tc.want && r != flowOK {
					want = 1
				}
				if got := fc.heldCount(r); got != want {
					t.Fatalf("held %v: %d, want %d", r, got, want)
				}
			}
		})
	}
}

// flowAddOne adds one message of n bytes past pq's largest offset.
func flowAddOne(pq *processQueue, n int) *processQueue {
	pq.mu.Lock()
	next := pq.mu.queueOffsetMax + 1
	pq.mu.Unlock()
	pq.put([]*MessageExt{{QueueOffset: next, Message: Message{Body: make([]byte, n)}}})
	return pq
}

func TestFlowControlCountsAndDrain(t *testing.T) {
	fc, err := newFlowControl(flowLimits{queueCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	msgs := pqMsgs(0, 1, 2)
	pq := newProcessQueue(false, pqT0)
	pq.put(msgs)
	for range 3 {
		if _, r := fc.check(pq, 1, false); r != flowQueueCount {
			t.Fatalf("reason %v", r)
		}
	}
	if got := fc.heldCount(flowQueueCount); got != 3 {
		t.Fatalf("held %d", got)
	}
	// Consuming one message brings the queue back to its limit.
	pq.remove(msgs[:1])
	if d, r := fc.check(pq, 1, false); d != 0 || r != flowOK {
		t.Fatalf("delay %v reason %v after consuming", d, r)
	}
	if pq.count() != 2 {
		t.Fatalf("flow control changed the queue: count %d", pq.count())
	}
}

func TestFlowLimitsDefaultsAndValidate(t *testing.T) {
	l := flowLimits{}.withDefaults()
	want := flowLimits{queueCount: 1000, queueSize: 100 << 20, topicCount: -1, topicSize: -1, maxSpan: 2000}
	if l != want {
		t.Fatalf("defaults %+v, want %+v", l, want)
	}
	_, err := newFlowControl(flowLimits{queueCount: -1, queueSize: -5, topicCount: -2, topicSize: -2, maxSpan: -1})
	if err == nil {
		t.Fatal("no error")
	}
	for _, s := range []string{"per-queue message limit -1", "per-queue size limit -5", "per-topic message limit -2", "per-topic size limit -2", "max offset span -1"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if flowSpan.String() != "queue offset span" || flowReason(99).String() != "flowReason(99)" {
		t.Fatal("reason names")
	}
}
