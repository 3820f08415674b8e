// Package outbox owns the format of the broker's retry and dead-letter
// events and the types of dead-letter selection and resend. The broker
// writes the events and serves the dead letters; the NATS bridge reads
// and publishes them. Both import this package and neither imports the
// other.
//
// # Event records
//
// The broker keeps its events in one queue (its events topic, queue 0).
// Each event is one stored message whose body is a JSON object (Record):
//
//	+-------------------+--------+-----------------------------------------------+
//	| field             | type   | meaning                                       |
//	+-------------------+--------+-----------------------------------------------+
//	| kind              | string | "retry" (KindRetry) or "dlq" (KindDLQ)        |
//	| group             | string | consumer group, without %RETRY% or %DLQ%      |
//	| topic             | string | the message's original topic                  |
//	| msgId             | string | the id clients saw (UNIQ_KEY or offsetMsgId)  |
//	| originMsgId       | string | the first delivery's id; omitted when unknown |
//	| queueId           | int32  | queue of the failed delivery; -1: unknown     |
//	| queueOffset       | int64  | its offset in that queue; -1: unknown         |
//	| reconsumeTimes    | int32  | failed attempts so far                        |
//	| maxReconsumeTimes | int32  | the limit that applied                        |
//	| delayLevel        | int32  | retry only: the delay level; omitted if 0     |
//	| nextAttemptAt     | int64  | retry only: when it is due, Unix ms; omitted  |
//	|                   |        | when unknown                                  |
//	| reason            | string | why the message moved                         |
//	| movedSize         | int64  | bytes from the moved message's record start   |
//	|                   |        | to this record's start in the commit log      |
//	+-------------------+--------+-----------------------------------------------+
//
// Decoders ignore fields they do not know, so fields can be added.
//
// Invariants:
//
//  1. An event is stored in the same append as the move it describes,
//     right after the moved message: an event exists if and only if its
//     move happened, and the moved message's commit-log offset is the
//     event's offset minus movedSize.
//  2. Event offsets (positions in the events queue) only grow; events the
//     broker drops to bound the queue's size leave a gap below the first
//     retained offset, never a hole inside the retained range.
//  3. On a replicated broker set the events queue replicates with the
//     commit log (core/cluster): an event has the same offset on every
//     member, so a reader's position (the NATS bridge's cursor) means the
//     same on the next leader.
package outbox
