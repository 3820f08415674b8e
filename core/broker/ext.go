package broker

import (
	"context"
	"time"

	"github.com/rmq-go/rmq/core/allocate"
	"github.com/rmq-go/rmq/core/message"
)

// TxnAction is a transaction-check policy's decision for a half message.
type TxnAction int

// Transaction-check decisions.
const (
	// TxnCheckNow asks the producer for the transaction's state now.
	TxnCheckNow TxnAction = iota
	// TxnWait decides again after TxnDecision.Wait.
	TxnWait
	// TxnCommit commits without asking the producer.
	TxnCommit
	// TxnRollback rolls back without asking the producer.
	TxnRollback
	// TxnDiscard drops the half message without committing it, recording
	// the decision.
	TxnDiscard
)

// HalfMessage is what a transaction-check policy sees of a half message.
type HalfMessage struct {
	ProducerGroup  string
	Topic          string // the real topic
	MsgID          string // UNIQ_KEY
	CheckTimes     int32  // checks sent so far
	BornTimestamp  int64  // ms
	StoreTimestamp int64  // ms, when the half message was stored
	// LastCheckTimestamp is when the latest check was sent (ms); 0 before
	// the first.
	LastCheckTimestamp int64
	Properties         message.Properties
}

// TxnDecision is a policy's answer for one half message.
type TxnDecision struct {
	Action TxnAction
	Wait   time.Duration // for TxnWait
}

// TxnPolicy decides, per unresolved half message, whether to check it
// back with its producer now, wait, or resolve it. An error means
// "unknown, ask again later" for the whole batch, never commit or
// rollback. The half messages of one call share a producer group.
// Implementations are safe for concurrent use.
type TxnPolicy interface {
	Decide(ctx context.Context, now time.Time, batch []HalfMessage, out []TxnDecision) error
}

// Queue names one message queue.
type Queue = allocate.Queue

// Allocator assigns a consumer group's queues to its clients: an
// allocation strategy from outside the broker, such as a WASM plugin. It
// returns the indices into queues assigned to clientID; clientIDs and
// queues are sorted (allocate.Compare). A failing allocator keeps the
// previous assignment.
type Allocator interface {
	Allocate(ctx context.Context, group, clientID string, clientIDs []string, queues []Queue) ([]int, error)
}
