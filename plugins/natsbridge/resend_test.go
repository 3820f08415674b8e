package natsbridge_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rmq-go/rmq/core/outbox"
	"github.com/rmq-go/rmq/plugins/natsbridge"
)

// fakeResender holds dead letters of one group in memory and counts
// resends.
type fakeResender struct {
	mu      sync.Mutex
	letters map[string][]string // group → msg ids, by queue offset
	resent  []outbox.Resent
	records map[string][]byte
	fail    error
}

func newFakeResender() *fakeResender {
	return &fakeResender{letters: map[string][]string{}, records: map[string][]byte{}}
}

func (f *fakeResender) find(sel outbox.DLQSelector) (int64, error) {
	ids := f.letters[sel.Group]
	for i, id := range ids {
		if (sel.MsgID != "" && sel.MsgID == id) || (sel.QueueOffset != nil && *sel.QueueOffset == int64(i)) {
			return int64(i), nil
		}
	}
	return 0, fmt.Errorf("%w in group %s", outbox.ErrNoDeadLetter, sel.Group)
}

func (f *fakeResender) ListDLQ(sel outbox.DLQSelector) ([]outbox.DeadLetter, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	off, err := f.find(sel)
	if err != nil {
		return nil, err
	}
	return []outbox.DeadLetter{{QueueOffset: off, MsgID: f.letters[sel.Group][off]}}, nil
}

func (f *fakeResender) ResendDLQ(sel outbox.DLQSelector, target string) ([]outbox.Resent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	off, err := f.find(sel)
	if err != nil {
		return nil, err
	}
	r := outbox.Resent{QueueOffset: off, OldMsgID: f.letters[sel.Group][off], NewMsgID: fmt.Sprintf("NEW%d", len(f.resent)), Topic: target}
	f.resent = append(f.resent, r)
	return []outbox.Resent{r}, nil
}

func (f *fakeResender) resends() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.resent)
}

func (f *fakeResender) Record(name string) ([]byte, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.records[name]
	return v, ok, nil
}

func (f *fakeResender) PutRecord(name string, v []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.records[name] = v
	return nil
}

func (f *fakeResender) DeleteRecord(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.records, name)
	return nil
}

func (f *fakeResender) EachRecord(prefix string, fn func(string, []byte) error) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, v := range f.records {
		if strings.HasPrefix(k, prefix) {
			if err := fn(k, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func resendRequest(t *testing.T, nc *nats.Conn, subj string, req any) natsbridge.ResendReply {
	t.Helper()
	data, _ := json.Marshal(req)
	m, err := nc.Request(subj, data, 5*time.Second)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	var r natsbridge.ResendReply
	if err := json.Unmarshal(m.Data, &r); err != nil {
		t.Fatalf("reply %q: %v", m.Data, err)
	}
	return r
}

func TestResendService(t *testing.T) {
	ns := runNATS(t)
	src := newFakeSource()
	res := newFakeResender()
	res.letters["g"] = []string{"A", "B", "C"}
	now := time.Now()
	var clockMu sync.Mutex
	opts := testOptions(ns, src)
	opts.Resend, opts.Resender = true, res
	opts.NotFoundGrace = time.Millisecond
	opts.Now = func() time.Time {
		clockMu.Lock()
		defer clockMu.Unlock()
		return now
	}
	startBridge(t, opts)
	nc, _ := ns.client(t)
	subj := natsbridge.ResendSubject("rmq", "DefaultCluster")

	r := resendRequest(t, nc, subj, natsbridge.ResendRequest{Group: "g", MsgID: "B", Target: "retry", Key: "k1"})
	if !r.OK || r.Duplicate || len(r.Resent) != 1 || r.Resent[0].NewMsgID != "NEW0" || r.Broker != "broker-a" {
		t.Fatalf("first reply %+v", r)
	}
	// The same request again: answered as before, not resent.
	r = resendRequest(t, nc, subj, natsbridge.ResendRequest{Group: "g", MsgID: "B", Target: "retry", Key: "k1"})
	if !r.OK || !r.Duplicate || len(r.Resent) != 1 || r.Resent[0].NewMsgID != "NEW0" {
		t.Fatalf("repeated reply %+v", r)
	}
	if n := res.resends(); n != 1 {
		t.Fatalf("%d resends, want 1", n)
	}
	// The key for something else: refused.
	r = resendRequest(t, nc, subj, natsbridge.ResendRequest{Group: "g", MsgID: "C", Key: "k1"})
	if r.OK || r.Code != natsbridge.CodeKeyConflict {
		t.Fatalf("reused key: %+v", r)
	}
	// By queue offset, default target.
	off := int64(0)
	r = resendRequest(t, nc, subj, natsbridge.ResendRequest{Group: "g", QueueOffset: &off, Key: "k2"})
	if !r.OK || r.Resent[0].OldMsgID != "A" || r.Resent[0].Topic != outbox.ResendOrigin {
		t.Fatalf("by offset: %+v", r)
	}
	// Not found: the key stays free.
	r = resendRequest(t, nc, subj, natsbridge.ResendRequest{Group: "g", MsgID: "Z", Key: "k3"})
	if r.OK || r.Code != natsbridge.CodeNotFound {
		t.Fatalf("not found: %+v", r)
	}
	res.mu.Lock()
	res.letters["g"] = append(res.letters["g"], "Z")
	res.mu.Unlock()
	r = resendRequest(t, nc, subj, natsbridge.ResendRequest{Group: "g", MsgID: "Z", Key: "k3"})
	if !r.OK {
		t.Fatalf("after the dead letter appeared: %+v", r)
	}
	// Bad requests.
	for _, req := range []any{
		natsbridge.ResendRequest{Group: "g", MsgID: "A"},
		natsbridge.ResendRequest{Group: "g", Key: "x"},
		natsbridge.ResendRequest{Group: "g", MsgID: "A", Key: "x", Target: "elsewhere"},
		map[string]any{"group": "g", "msgId": "A", "key": "x", "extra": 1},
	} {
		if r := resendRequest(t, nc, subj, req); r.OK || r.Code != natsbridge.CodeBadRequest {
			t.Errorf("%+v: %+v", req, r)
		}
	}
	// A request for another broker is not answered here.
	data, _ := json.Marshal(natsbridge.ResendRequest{Group: "g", MsgID: "A", Key: "k4", Broker: "broker-b"})
	if _, err := nc.Request(subj, data, 200*time.Millisecond); !errors.Is(err, nats.ErrTimeout) {
		t.Fatalf("another broker's request: %v", err)
	}
	// A failed append keeps its answer for the key.
	res.mu.Lock()
	res.fail = errors.New("disk on fire")
	res.mu.Unlock()
	r = resendRequest(t, nc, subj, natsbridge.ResendRequest{Group: "g", MsgID: "C", Key: "k5"})
	if r.OK || r.Code != natsbridge.CodeFailed {
		t.Fatalf("failure: %+v", r)
	}
	res.mu.Lock()
	res.fail = nil
	res.mu.Unlock()
	r = resendRequest(t, nc, subj, natsbridge.ResendRequest{Group: "g", MsgID: "C", Key: "k5"})
	if r.OK || !r.Duplicate || r.Code != natsbridge.CodeFailed {
		t.Fatalf("retry of a failure: %+v", r)
	}
	// Keys expire after the TTL.
	clockMu.Lock()
	now = now.Add(natsbridge.DefaultResendKeyTTL + time.Minute)
	clockMu.Unlock()
	r = resendRequest(t, nc, subj, natsbridge.ResendRequest{Group: "g", MsgID: "B", Target: "retry", Key: "k1"})
	if !r.OK || r.Duplicate {
		t.Fatalf("after the TTL: %+v", r)
	}
	res.mu.Lock()
	left := 0
	for k := range res.records {
		if strings.HasPrefix(k, "natsbridge/resend/") { // not the epoch
			left++
		}
	}
	res.mu.Unlock()
	if left != 1 {
		t.Fatalf("%d keys kept after the sweep, want 1", left)
	}
}

// TestResendInterrupted finds a key claimed by a request that never
// finished, as after a crash between the claim and the resend.
func TestResendInterrupted(t *testing.T) {
	ns := runNATS(t)
	res := newFakeResender()
	res.letters["g"] = []string{"A"}
	opts := testOptions(ns, newFakeSource())
	opts.Resend, opts.Resender = true, res
	startBridge(t, opts)
	nc, _ := ns.client(t)
	subj := natsbridge.ResendSubject("rmq", "DefaultCluster")
	r := resendRequest(t, nc, subj, natsbridge.ResendRequest{Group: "g", MsgID: "A", Key: "k"})
	if !r.OK {
		t.Fatal(r)
	}
	// Turn the finished record back into a bare claim.
	res.mu.Lock()
	for k, v := range res.records {
		if !strings.HasPrefix(k, "natsbridge/resend/") {
			continue // the epoch
		}
		var rec map[string]any
		json.Unmarshal(v, &rec)
		rec["done"] = false
		delete(rec, "reply")
		res.records[k], _ = json.Marshal(rec)
	}
	res.mu.Unlock()
	r = resendRequest(t, nc, subj, natsbridge.ResendRequest{Group: "g", MsgID: "A", Key: "k"})
	if r.OK || r.Code != natsbridge.CodeInterrupted {
		t.Fatalf("interrupted: %+v", r)
	}
	if res.resends() != 1 {
		t.Fatal("resent twice")
	}
}
