package grpcserver

import (
	"slices"
	"testing"
	"time"

	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// TestLiteSubsWholeSetRaces: the clients' whole set (COMPLETE_ADD), taken
// before a subscribe or an unsubscribe of theirs and arriving after it,
// does not undo it for liteGrace; after that the whole set is the truth.
func TestLiteSubsWholeSetRaces(t *testing.T) {
	subs := newLiteSubs(10, 10)
	now := time.Unix(1000, 0)
	apply := func(action pb.LiteSubscriptionAction, names ...string) {
		t.Helper()
		if err := subs.sync("c", "g", "T", action, names, nil, now); err != nil {
			t.Fatal(err)
		}
	}
	has := func(want ...string) {
		t.Helper()
		if got := subs.topics("c", "g", "T"); !slices.Equal(got, want) {
			t.Fatalf("subscribed to %v, want %v", got, want)
		}
	}
	apply(pb.LiteSubscriptionAction_PARTIAL_ADD, "a")
	apply(pb.LiteSubscriptionAction_COMPLETE_ADD) // the startup set, taken before
	has("a")
	apply(pb.LiteSubscriptionAction_PARTIAL_ADD, "b")
	apply(pb.LiteSubscriptionAction_PARTIAL_REMOVE, "a")
	apply(pb.LiteSubscriptionAction_COMPLETE_ADD, "a") // taken before both
	has("b")
	now = now.Add(liteGrace + time.Second)
	apply(pb.LiteSubscriptionAction_COMPLETE_ADD, "a", "c") // the truth now
	has("a", "c")
	apply(pb.LiteSubscriptionAction_COMPLETE_REMOVE)
	has()
	// A stale version changes nothing.
	v := func(n int64) *int64 { return &n }
	if err := subs.sync("c", "g", "T", pb.LiteSubscriptionAction_PARTIAL_ADD, []string{"x"}, v(5), now); err != nil {
		t.Fatal(err)
	}
	if err := subs.sync("c", "g", "T", pb.LiteSubscriptionAction_PARTIAL_ADD, []string{"y"}, v(4), now); err != nil {
		t.Fatal(err)
	}
	has("x")
}

// TestLiteSubsBounds: a client past the quota and clients past the cap
// are refused; a client without a session is forgotten a session expiry
// after its last sync.
func TestLiteSubsBounds(t *testing.T) {
	subs := newLiteSubs(2, 3)
	now := time.Unix(1000, 0)
	if err := subs.sync("c1", "g", "T", pb.LiteSubscriptionAction_COMPLETE_ADD, []string{"a", "b", "c", "d"}, nil, now); codeOf(err) != pb.Code_LITE_SUBSCRIPTION_QUOTA_EXCEEDED {
		t.Fatalf("past the quota: %v", err)
	}
	for _, id := range []string{"c1", "c2"} {
		if err := subs.sync(id, "g", "T", pb.LiteSubscriptionAction_PARTIAL_ADD, []string{"a"}, nil, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := subs.sync("c3", "g", "T", pb.LiteSubscriptionAction_PARTIAL_ADD, []string{"a"}, nil, now); codeOf(err) != pb.Code_TOO_MANY_REQUESTS {
		t.Fatalf("past the cap: %v", err)
	}
	alive := func(id string) bool { return id == "c1" }
	subs.sweep(now.Add(time.Minute), 2*time.Minute, alive)
	if subs.topics("c2", "g", "T") == nil {
		t.Fatal("forgotten before the expiry")
	}
	subs.sweep(now.Add(3*time.Minute), 2*time.Minute, alive)
	if subs.topics("c2", "g", "T") != nil || subs.topics("c1", "g", "T") == nil {
		t.Fatal("the sweep kept a client without a session, or dropped one with")
	}
}
