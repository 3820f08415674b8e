package sdk

import (
	"time"

	"github.com/rmq-go/rmq/sdk/abi"
)

// Action is what a transaction-check policy decides for a half message.
type Action uint32

// The actions.
const (
	// CheckNow asks the producer for the transaction's state now.
	CheckNow = Action(abi.TxnCheckNow)
	// Wait decides again after Decision.Wait.
	Wait = Action(abi.TxnWait)
	// Commit commits the message without asking.
	Commit = Action(abi.TxnCommit)
	// Rollback rolls the message back without asking.
	Rollback = Action(abi.TxnRollback)
	// Discard gives up on the message, as RocketMQ does after too many
	// checks.
	Discard = Action(abi.TxnDiscard)
)

// Decision is a policy's answer for one half message.
type Decision struct {
	Action Action
	Wait   time.Duration // for Wait; whole ms, at most about 49 days
}

// HalfMessage is one half (prepared) message as a policy sees it. Like
// Message, it is a view valid only until Check returns.
type HalfMessage struct{ h abi.HalfMessage }

// ProducerGroup returns the producer group that sent the message.
func (m *HalfMessage) ProducerGroup() string { return view(m.h.ProducerGroup) }

// Topic returns the message's real topic.
func (m *HalfMessage) Topic() string { return view(m.h.Topic) }

// MsgID returns the client's message id (UNIQ_KEY).
func (m *HalfMessage) MsgID() string { return view(m.h.MsgID) }

// Properties returns the message's properties.
func (m *HalfMessage) Properties() Properties { return Properties(m.h.Properties) }

// CheckTimes returns how many checks were made so far.
func (m *HalfMessage) CheckTimes() int32 { return m.h.CheckTimes }

// BornTimestamp returns the producer's clock when sent, in ms.
func (m *HalfMessage) BornTimestamp() int64 { return m.h.BornTimestamp }

// StoreTimestamp returns the broker's clock when stored, in ms.
func (m *HalfMessage) StoreTimestamp() int64 { return m.h.StoreTimestamp }

// TxnPolicy decides, for each half message the broker's checker finds, what
// to do next. nowMs is the broker's clock in ms. An error makes the broker
// treat the message as UNKNOWN and check it again later.
type TxnPolicy interface {
	Check(m *HalfMessage, nowMs int64) (Decision, error)
}

// TxnPolicyFunc adapts a function to TxnPolicy.
type TxnPolicyFunc func(m *HalfMessage, nowMs int64) (Decision, error)

// Check calls f.
func (f TxnPolicyFunc) Check(m *HalfMessage, nowMs int64) (Decision, error) { return f(m, nowMs) }

// waitMs converts a wait to the layout's u32 ms.
func waitMs(d time.Duration) uint32 {
	ms := d.Milliseconds()
	switch {
	case ms < 0:
		return 0
	case ms > 0xFFFFFFFF:
		return 0xFFFFFFFF
	}
	return uint32(ms)
}

// runTxnCheck is broker_txn_check.
func runTxnCheck(in []byte, count uint32, out []byte) abi.Status {
	if state.txn == nil {
		return fail(abi.StatusNotImplemented, "this module registers no transaction-check policy")
	}
	now, rest, err := abi.ReadTxnHeader(in)
	if err != nil {
		return fail(abi.StatusBadInput, "txn batch header does not parse")
	}
	if uint64(len(out)) < uint64(count)*abi.TxnResultLen {
		return fail(abi.StatusBadInput, "output shorter than the message count")
	}
	m := &state.half
	for i := range int(count) {
		if rest, err = abi.ReadHalfMessage(rest, &m.h); err != nil {
			return fail(abi.StatusBadInput, "half message does not parse")
		}
		d, err := state.txn.Check(m, now)
		if err != nil {
			return fail(abi.StatusFailed, err.Error())
		}
		abi.PutTxnResult(out, i, abi.TxnAction(d.Action), waitMs(d.Wait))
	}
	return abi.StatusOK
}
