package wasm

import (
	"context"
	"fmt"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/sdk/abi"
)

// TxnAction is a transaction-check policy's decision for a half message.
type TxnAction uint8

// The actions.
const (
	TxnCheckNow TxnAction = iota + 1 // ask the producer now
	TxnWait                          // decide again after TxnDecision.Wait
	TxnCommit                        // commit without asking
	TxnRollback                      // roll back without asking
	TxnDiscard                       // give up on the message
)

var txnActionNames = [...]string{"", "check-now", "wait", "commit", "rollback", "discard"}

// String names a.
func (a TxnAction) String() string {
	if int(a) < len(txnActionNames) && a != 0 {
		return txnActionNames[a]
	}
	return fmt.Sprintf("TxnAction(%d)", a)
}

// HalfMessage is one half (prepared) message offered to a policy.
type HalfMessage struct {
	ProducerGroup  string
	Topic          string // the real topic
	MsgID          string // UNIQ_KEY
	CheckTimes     int32  // checks made so far
	BornTimestamp  int64  // ms
	StoreTimestamp int64  // ms
	Properties     message.Properties
}

// TxnDecision is what to do with one half message.
type TxnDecision struct {
	Action TxnAction
	Wait   time.Duration // for TxnWait
}

// TxnCheck runs the plugin's policy over msgs at the broker's time now and
// fills out (len(out) == len(msgs)), in calls of at most abi.MaxBatchRecords
// messages. On error the caller treats the messages as UNKNOWN.
func (p *Plugin) TxnCheck(ctx context.Context, now time.Time, msgs []HalfMessage, out []TxnDecision) error {
	if len(out) != len(msgs) {
		panic(fmt.Sprintf("wasm: TxnCheck with %d messages and %d results", len(msgs), len(out)))
	}
	if p.kind != KindTxnCheck {
		return &Error{Plugin: p.name, Op: "txncheck", Err: wrapf(ErrKind, "plugin is a %s plugin", p.kind)}
	}
	if len(msgs) == 0 {
		return nil
	}
	nowMs := now.UnixMilli()
	return p.run(ctx, "txncheck", func(g *generation, inst *instance) (int, error) {
		done := 0
		for done < len(msgs) {
			n, err := txnCall(ctx, g, inst, nowMs, msgs[done:], out[done:])
			if err != nil {
				return done, err
			}
			done += n
		}
		return done, nil
	})
}

// txnCall runs one broker_txn_check call over a prefix of msgs.
func txnCall(ctx context.Context, g *generation, inst *instance, nowMs int64, msgs []HalfMessage, out []TxnDecision) (int, error) {
	hs := make([]abi.HalfMessage, 0, min(len(msgs), abi.MaxBatchRecords))
	inLen := abi.TxnHeaderLen
	for len(hs) < len(msgs) && len(hs) < abi.MaxBatchRecords {
		m := &msgs[len(hs)]
		h := abi.HalfMessage{
			CheckTimes:     m.CheckTimes,
			BornTimestamp:  m.BornTimestamp,
			StoreTimestamp: m.StoreTimestamp,
			ProducerGroup:  []byte(m.ProducerGroup),
			Topic:          []byte(m.Topic),
			MsgID:          []byte(m.MsgID),
			Properties:     m.Properties,
		}
		n := h.EncodedLen()
		if n < 0 {
			return 0, wrapf(ErrFailed, "half message %q does not fit the layout", m.MsgID)
		}
		if len(hs) > 0 && inLen+n > abi.MaxBatchBytes {
			break
		}
		inLen += n
		hs = append(hs, h)
	}
	count := len(hs)
	outLen := count * abi.TxnResultLen
	if err := inst.ensureBuffer(ctx, uint32(abi.OutOffset(inLen)+outLen)); err != nil {
		return 0, err
	}
	dst := abi.AppendTxnHeader(inst.view(0, uint32(inLen))[:0], nowMs)
	for i := range hs {
		dst = abi.AppendHalfMessage(dst, &hs[i])
	}
	res, err := inst.batch(ctx, uint32(inLen), uint32(count), uint32(outLen))
	if err != nil {
		return 0, err
	}
	for i := range count {
		a, wait := abi.ReadTxnResult(res, i)
		if a < abi.TxnCheckNow || a > abi.TxnDiscard {
			return 0, wrapf(ErrOutput, "broker_txn_check left action %d for message %d of %d", a, i, count)
		}
		out[i] = TxnDecision{Action: TxnAction(a), Wait: time.Duration(wait) * time.Millisecond}
	}
	return count, nil
}
