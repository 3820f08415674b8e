package main_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/examples/wasm/internal/guestbuild"
	"github.com/rmq-go/rmq/plugins/wasm"
	"github.com/rmq-go/rmq/sdk"
)

func TestTxnBackoff(t *testing.T) {
	module := guestbuild.Module(t, ".")
	cache := t.TempDir()
	p, err := wasm.Load(t.Context(), wasm.Options{Name: "txnbackoff", Kind: wasm.KindTxnCheck, Module: module,
		CacheDir: cache, Config: []byte("max=4 base=1s cap=3s giveup=rollback")})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(t.Context())

	const stored = 1_700_000_000_000
	// Checks are due 1s, 3s, 6s and 9s after storing (steps 1, 2, 3, 3).
	cases := []struct {
		checks int32
		after  time.Duration
		props  map[string]string
		want   wasm.TxnDecision
	}{
		{0, 0, nil, wasm.TxnDecision{Action: wasm.TxnWait, Wait: time.Second}},
		{0, 1500 * time.Millisecond, nil, wasm.TxnDecision{Action: wasm.TxnCheckNow}},
		{1, 1500 * time.Millisecond, nil, wasm.TxnDecision{Action: wasm.TxnWait, Wait: 1500 * time.Millisecond}},
		{2, 5 * time.Second, nil, wasm.TxnDecision{Action: wasm.TxnWait, Wait: time.Second}},
		{3, 9 * time.Second, nil, wasm.TxnDecision{Action: wasm.TxnCheckNow}},
		{4, time.Hour, nil, wasm.TxnDecision{Action: wasm.TxnRollback}},
		{0, 2 * time.Second, map[string]string{"CHECK_IMMUNITY_TIME_IN_SECONDS": "10"},
			wasm.TxnDecision{Action: wasm.TxnWait, Wait: 8 * time.Second}},
	}
	now := time.UnixMilli(stored)
	out := make([]wasm.TxnDecision, 1)
	for i, c := range cases {
		m := wasm.HalfMessage{ProducerGroup: "pg", Topic: "orders", MsgID: "id", CheckTimes: c.checks,
			StoreTimestamp: stored, Properties: message.EncodeProperties(c.props)}
		if err := p.TxnCheck(t.Context(), now.Add(c.after), []wasm.HalfMessage{m}, out); err != nil {
			t.Fatal(err)
		}
		if out[0] != c.want {
			t.Errorf("case %d: %+v, want %+v", i, out[0], c.want)
		}
	}

	// A bad config is refused at load, naming the plugin and the word.
	_, err = wasm.Load(t.Context(), wasm.Options{Name: "bad", Kind: wasm.KindTxnCheck, Module: module,
		CacheDir: cache, Config: []byte("max=0")})
	if !errors.Is(err, wasm.ErrInit) || err.Error() == "" {
		t.Fatalf("bad config: %v", err)
	}
	t.Log(err)
}

func TestSelfTestsNative(t *testing.T) {
	if err := sdk.InitForTest(nil); err != nil {
		t.Fatal(err)
	}
	if err := sdk.CheckSelfTests(); err != nil {
		t.Fatal(err)
	}
}
