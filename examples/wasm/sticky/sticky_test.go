package main_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
	"github.com/rmq-go/rmq/plugins/wasm"
	"github.com/rmq-go/rmq/sdk"
)

func queues(brokers, perBroker int) []wasm.Queue {
	var qs []wasm.Queue
	for b := range brokers {
		for i := range perBroker {
			qs = append(qs, wasm.Queue{Topic: "orders", BrokerName: fmt.Sprintf("broker-%d", b), QueueID: int32(i)})
		}
	}
	return qs
}

func clients(n int) []string {
	cs := make([]string, n)
	for i := range cs {
		cs[i] = fmt.Sprintf("10.0.0.%d@%d", i+1, 1000+i)
	}
	slices.Sort(cs)
	return cs
}

// assign returns every client's queues (by identity) as the plugin places
// them, checking that the shares partition the queues within the bound.
func assign(t *testing.T, p *wasm.Plugin, cs []string, qs []wasm.Queue) map[wasm.Queue]string {
	t.Helper()
	owner := map[wasm.Queue]string{}
	share := (len(qs) + len(cs) - 1) / len(cs)
	for _, c := range cs {
		mine, err := p.AllocateQueues(t.Context(), wasm.AllocateRequest{Group: "g", ClientID: c, Clients: cs, Queues: qs})
		if err != nil {
			t.Fatal(err)
		}
		if len(mine) > share {
			t.Fatalf("%s got %d queues, share is %d", c, len(mine), share)
		}
		for _, q := range mine {
			if prev, ok := owner[q]; ok {
				t.Fatalf("queue %v given to %s and %s", q, prev, c)
			}
			owner[q] = c
		}
	}
	if len(owner) != len(qs) {
		t.Fatalf("%d of %d queues assigned", len(owner), len(qs))
	}
	return owner
}

func TestSticky(t *testing.T) {
	p, err := wasm.Load(t.Context(), wasm.Options{Name: "sticky", Kind: wasm.KindAllocate,
		Module: guestbuild.Module(t, "."), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(t.Context())

	qs := queues(3, 8)
	before := assign(t, p, clients(4), qs)

	// The broker's list order does not matter.
	rev := slices.Clone(qs)
	slices.Reverse(rev)
	if again := assign(t, p, clients(4), rev); fmt.Sprint(again) != fmt.Sprint(before) {
		t.Fatal("the assignment depends on the queue order")
	}

	// A client leaves: its queues move, few others do.
	after := assign(t, p, clients(4)[1:], qs)
	moved, orphaned := 0, 0
	for q, c := range before {
		if c == clients(4)[0] {
			orphaned++
		} else if after[q] != c {
			moved++
		}
	}
	t.Logf("a client left: %d orphaned queues moved, %d other queues moved", orphaned, moved)
	if moved > orphaned {
		t.Fatalf("%d queues of staying clients moved, more than the %d the leaver had", moved, orphaned)
	}

	if _, err := p.Allocate(t.Context(), wasm.AllocateRequest{Group: "g", ClientID: "ghost", Clients: clients(2), Queues: qs}); err == nil {
		t.Fatal("a client outside the group got queues")
	}
	idx, err := p.Allocate(t.Context(), wasm.AllocateRequest{Group: "g", ClientID: clients(2)[0], Clients: clients(2)})
	if err != nil || len(idx) != 0 {
		t.Fatalf("no queues: %v, %v", idx, err)
	}
}

func TestSelfTestsNative(t *testing.T) {
	if err := sdk.CheckSelfTests(); err != nil {
		t.Fatal(err)
	}
}
