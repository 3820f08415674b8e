// Package grpcserver serves RocketMQ 5 clients: the gRPC MessagingService
// of apache.rocketmq.v2 (internal/rmqpb), with POP consumption, over the
// same broker and store as the 4.x remoting port. It is a front end like
// the remoting handlers: sends, transactions, filters and dead letters go
// through core/broker's in-process methods (local.go there), messages are
// read through the store's queue iterator, and the POP state lives in the
// store's index.
//
// # What is served
//
//	+-------------------------+---------------------------------------------+
//	| RPC                     | behaviour                                   |
//	+-------------------------+---------------------------------------------+
//	| QueryRoute              | every queue of the topic on this broker,    |
//	|                         | permissions, the advertised gRPC endpoint;  |
//	|                         | auto-creates as a send would                |
//	| Telemetry               | answers each Settings with the server's     |
//	|                         | values; keeps the session alive; carries    |
//	|                         | RecoverOrphanedTransactionCommand to a      |
//	|                         | producer of the transaction's topic         |
//	| Heartbeat               | refreshes a session (none: 40015)           |
//	| NotifyClientTermination | drops the session                           |
//	| SendMessage             | NORMAL, FIFO (queue = hash(message_group)), |
//	|                         | DELAY (the timer), TRANSACTION (half); the  |
//	|                         | request's messages share a group-commit     |
//	|                         | round, each answered once stored (fsync'd   |
//	|                         | under the sync flush mode)                  |
//	| EndTransaction          | commit or roll back by transaction id       |
//	| QueryAssignment         | one queue, id -1 (FIFO group: every queue)  |
//	| ReceiveMessage          | POP across every queue, long-polling        |
//	| AckMessage              | ends a delivery                             |
//	| ChangeInvisibleDuration | new deadline, new handle, old one invalid   |
//	| ForwardMessageToDead... | moves a delivery to %DLQ%<group>            |
//	| PullMessage, GetOffset, | UNSUPPORTED (50500) with a message, at once |
//	| UpdateOffset,           |                                             |
//	| QueryOffset, Recall..., |                                             |
//	| SyncLiteSubscription    |                                             |
//	+-------------------------+---------------------------------------------+
//
// Every response carries a Status, OK = 20000 when served; errors become
// Status codes in one place (codes.go, statusOf). gRPC's own status is OK
// except for broken streams. Every request needs x-mq-client-id (else
// 40017); with the broker's ACL on, its authorization metadata must sign
// x-mq-date-time with an account's secret (acl.CheckSigned) holding the
// topics and groups the request names. Every refused request (a Status
// of 40000 and up but MESSAGE_NOT_FOUND) is logged with the method, the
// client's address, the code and its message, at most once per 10 s for
// each pair of method and code (refusals.go); 5xxxx at Warn, the rest at
// Info.
//
// # On a replicated set's replica
//
// With Options.Leader set the endpoint is a replica's (replica.go):
// QueryRoute and QueryAssignment answer as above but name the leader's
// gRPC endpoint as every queue's broker (HA_NOT_AVAILABLE while no leader
// is known), and every other call is refused before its handler runs
// with HA_NOT_AVAILABLE, its message naming the leader; the 5.x clients
// retry such a send. A replica keeps no POP state: the leader's is in
// the replicated store, so a new leader serves the flights, cursors and
// the receipt handles' secret its predecessor replicated.
//
// # POP state
//
// For each (group, topic, queue) the state is a cursor, the next offset
// never handed out, and the flights, the messages handed out and not
// acknowledged:
//
//	          receive                      ack
//	 queued ──────────► in flight ─────────────────► done
//	(≥ cursor)    attempt 1, deadline   (flight deleted)
//	                 │     ▲
//	 deadline passed │     │ receive: attempt+1, new delivery id,
//	 or Change...(0) ▼     │          new deadline
//	              deliverable again ──► %DLQ%<group> when attempt+1 would
//	                                    exceed the group's retryMaxTimes+1
//
// A push consumer's receive (auto_renew, no invisible duration) makes
// flights owned by its client: while that client's session lives, a
// passed deadline is renewed (30 s more) instead of ending the flight, for
// at most an hour; an explicit ChangeInvisibleDuration ends the renewal.
// Sessions are not durable, so after a restart such flights end at their
// stored deadline.
//
// # Retry policy
//
// A consumer's Settings answer carries its group's retry policy as
// Apache's proxy sends it: max_attempts retryMaxTimes+1, and the broker's
// delay levels (1s 5s 10s 30s 1m … 2h by default, --delay-levels) as a
// CUSTOMIZED backoff, or the group's own groupRetryPolicy (its ladder, or
// EXPONENTIAL). A push consumer's delivery given up with
// ChangeInvisibleDuration is a failed attempt: it comes back no earlier
// than the policy's delay for its attempt (the ladder's attempt-th step),
// whatever shorter time the client asked for; a simple consumer's comes
// back when it asked.
//
// A push consumer retries a receive whose answer it lost with the same
// attempt_id; the last 4096 attempts are remembered (positions, not
// bodies) and a retry gets those of its messages still current again,
// with the same handles.
//
// A receive first hands out flights whose deadline passed, then new
// messages from each queue's cursor through the filter (tag hash from the
// queue unit, then the record for SQL92). A FIFO group
// (consumeMessageOrderly) takes nothing new from a queue that has a
// flight. The group's consumer offset is kept at the lowest offset in
// flight (else the cursor), so retention, lag and 4.x consumers see what
// POP consumed.
//
// Index keys (store PutValues, no fsync; group and topic hold no NUL):
//
//	grpc/pop/c/<group>\x00<topic>\x00<queue u32>            → cursor u64
//	grpc/pop/f/<group>\x00<topic>\x00<queue u32><offset u64> → attempt u32,
//	                                                          delivery u64,
//	                                                          deadline ms u64
//	                                         [auto_renew: renew-until ms u64,
//	                                                      owner client id]
//	metadata grpc/pop/secret (fsync'd)                       → 32 random bytes
//
// # Receipt handles
//
// base64url (no padding) of 45 bytes:
//
//	+---------+----------+--------+-------------+--------------+----------+
//	| version | queue id | offset | delivery id | deadline ms  | MAC      |
//	| 1 (u8)  | u32      | u64    | u64         | u64 (Unix)   | 16 bytes |
//	+---------+----------+--------+-------------+--------------+----------+
//
// MAC is HMAC-SHA256 under the store's secret over "rh/" group NUL topic
// NUL and the 29 bytes before it, truncated. Transaction ids are the half
// message's commit-log offset (u64) and a 12-byte MAC, in hex.
//
// # Invariants
//
//  1. A handle is accepted only if its MAC verifies for the request's
//     group and topic, its flight exists, its delivery id is the flight's
//     current one and the flight's deadline has not passed. So a handle
//     acknowledges at most one delivery: a later delivery, a changed
//     invisible duration, an ack or a dead-letter move each make it
//     INVALID_RECEIPT_HANDLE.
//  2. A cursor is written in the same index batch as the flights of the
//     messages it passed, so after a crash no message is past the cursor
//     without being in flight: what was in flight is delivered again
//     after its deadline (at least once); an acknowledged message's flight
//     is deleted before the ack is answered, and it is never delivered
//     again unless the crash loses the unsynced deletion too.
//  3. delivery_attempt is 1 on the first delivery and grows by one on
//     each redelivery; the message due for attempt retryMaxTimes+2 is
//     stored in %DLQ%<group> (with its outbox event) and its flight ends.
//  4. A waiting receive is answered when a message arrives on its topic,
//     when a flight's deadline passes (a ChangeInvisibleDuration that
//     moves a deadline of its group before the receive's wake-up wakes it
//     to sleep until the new one), when its long-polling time or
//     (200 ms before) its deadline ends, or when the server stops; at most
//     MaxWaiting receives wait at once, and at most MaxSessions sessions
//     exist.
//  5. Nothing here writes a message except through core/broker: sends,
//     commits and dead letters keep the broker's invariants.
package grpcserver
