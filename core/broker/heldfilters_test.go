package broker_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// TestHeldPullFiltersBounded holds pulls that each carry a distinct large
// SQL92 expression. A held pull keeps its compiled filter after the filter
// cache evicts it, so without a bound 2,000 such pulls pinned 1.8 GiB
// (internal/server's resource test). Once the distinct filters of held
// pulls reach FilterCacheMaxBytes, a pull with a new filter is answered at
// once with PULL_NOT_FOUND; a pull whose filter is already held is still
// held.
func TestHeldPullFiltersBounded(t *testing.T) {
	const budget = 2 << 20 // an 8 KiB OR chain costs about 0.6 MB: three fit
	env := brokertest.Start(t, func(c *server.Config) { c.Broker.FilterCacheMaxBytes = budget })
	createTopic(t, env, "Good", 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	var base strings.Builder
	for base.Len() < 8<<10-32 {
		base.WriteString("a = 1 OR ")
	}
	expr := func(i int) string { return base.String() + "a = " + strconv.Itoa(i+2) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// pull sends one held pull with expression i and reports whether it
	// was held (true) or answered at once with PULL_NOT_FOUND (false).
	pull := func(i int) bool {
		t.Helper()
		before := env.Broker.HeldPulls()
		answer := make(chan *remoting.Command, 1)
		go func() {
			r, err := cl.Invoke(ctx, env.BrokerAddr, remoting.NewRequest(remoting.PullMessage, map[string]string{
				"consumerGroup": "g", "topic": "Good", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
				"sysFlag": "6", "commitOffset": "0", "suspendTimeoutMillis": "20000",
				"subscription": expr(i), "expressionType": "SQL92"}, nil))
			if err == nil {
				answer <- r
			}
		}()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case r := <-answer:
				if r.Code != remoting.PullNotFound {
					t.Fatalf("pull %d answered %v, want PULL_NOT_FOUND", i, r)
				}
				return false
			case <-deadline:
				t.Fatalf("pull %d neither held nor answered", i)
			case <-time.After(10 * time.Millisecond):
				if env.Broker.HeldPulls() > before {
					return true
				}
			}
		}
	}
	held := 0
	for i := range 20 {
		if pull(i) {
			held++
			if held != i+1 {
				t.Fatalf("pull %d held after an earlier one was refused", i)
			}
		}
	}
	if held < 1 || held > 4 {
		t.Fatalf("%d pulls with distinct 8 KiB expressions held within a %d byte budget, want 1 to 4", held, budget)
	}
	for range 3 {
		if !pull(0) {
			t.Fatal("a pull whose filter is already held was refused")
		}
	}
	if n := env.Broker.HeldPulls(); n != held+3 {
		t.Fatalf("%d pulls held, want %d", n, held+3)
	}
}
