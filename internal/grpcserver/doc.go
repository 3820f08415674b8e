// Package grpcserver serves RocketMQ 5 clients: the gRPC MessagingService
// of apache.rocketmq.v2 (internal/rmqpb), with POP consumption, over the
// same broker and store as the 4.x remoting port. It is a front end like
// the remoting handlers, and a translator only: sends, transactions,
// filters and dead letters go through core/broker's in-process methods
// (local.go there), and consumption through the broker's POP engine
// (Broker.POP, core/broker/pop.go), which keeps the POP state, the receipt
// handles and the waiting receives. This package maps each request to the
// broker's typed calls and the broker's errors to Status codes (codes.go);
// what is protocol only (sessions, Telemetry, building pb.Message) stays
// here.
//
// # What is served
//
//	+-------------------------+---------------------------------------------+
//	| RPC                     | behaviour                                   |
//	+-------------------------+---------------------------------------------+
//	| QueryRoute              | every queue of the topic on this broker,    |
//	|                         | permissions, the advertised gRPC endpoint;  |
//	|                         | auto-creates as a send would; then the      |
//	|                         | queues of the other broker sets serving it, |
//	|                         | each at its own endpoint (peers.go)         |
//	| Telemetry               | answers each Settings with the server's     |
//	|                         | values, or ends the stream with the reason  |
//	|                         | it refuses them (INVALID_ARGUMENT,          |
//	|                         | PERMISSION_DENIED, ...: clients apply any   |
//	|                         | settings answered, whatever the status);    |
//	|                         | keeps the session alive; carries            |
//	|                         | RecoverOrphanedTransactionCommand to a      |
//	|                         | producer of the transaction's topic         |
//	| Heartbeat               | refreshes a session (none: 40015)           |
//	| NotifyClientTermination | drops the session                           |
//	| SendMessage             | NORMAL, FIFO (queue = hash(message_group)), |
//	|                         | DELAY (the timer), TRANSACTION (half),      |
//	|                         | PRIORITY (queue = priority, at most the     |
//	|                         | last), LITE (its lite topic's queue); the   |
//	|                         | request's messages share a group-commit     |
//	|                         | round, each answered once stored (fsync'd   |
//	|                         | under the sync flush mode)                  |
//	| EndTransaction          | commit or roll back by transaction id       |
//	| QueryAssignment         | one queue, id -1 (FIFO group: every queue), |
//	|                         | here and on each other set serving the topic|
//	| ReceiveMessage          | POP across every queue, long-polling (a     |
//	|                         | PRIORITY topic: the highest queue first; a  |
//	|                         | lite consumer: its lite topics' queues)     |
//	| AckMessage              | ends a delivery                             |
//	| ChangeInvisibleDuration | new deadline, new handle, old one invalid   |
//	|                         | (suspend: the attempt is not counted)       |
//	| ForwardMessageToDead... | moves a delivery to %DLQ%<group>            |
//	| SyncLiteSubscription    | a lite consumer's lite topics (lite.go);    |
//	|                         | passed on to the topic's other sets         |
//	| RecallMessage           | cancels a waiting DELAY message by the      |
//	|                         | recall_handle of its send (Broker.Recall)   |
//	| PullMessage, GetOffset, | UNSUPPORTED (50500) with a message, at once |
//	| UpdateOffset,           |                                             |
//	| QueryOffset             |                                             |
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
// Info. Every response with a Status is counted by method and code
// (Counts, the broker's rmq_grpc_responses_total).
//
// # On a replicated set's replica
//
// With Options.Leader set the endpoint is a replica's (replica.go):
// QueryRoute and QueryAssignment answer as above but name the leader's
// gRPC endpoint as every queue's broker (HA_NOT_AVAILABLE while no leader
// is known), and every other call is refused before its handler runs
// with HA_NOT_AVAILABLE, its message naming the leader; the 5.x clients
// retry such a send. RecallMessage and SyncLiteSubscription, which the
// clients send to the endpoint they were given, are forwarded to the
// leader (forward.go). A replica opens no POP engine: the leader's state is
// in the replicated store, so a new leader serves the flights, cursors and
// the receipt handles' secret its predecessor replicated.
//
// # Several broker sets
//
// A RocketMQ 5 client asks the one endpoint it is given for its routes,
// but a topic may live on several broker sets. Every broker registers its
// advertised gRPC endpoint with the name servers (rmqGrpcAddr, see
// core/namesrv), and QueryRoute and QueryAssignment add the queues of
// the topic's other sets, each named with its master's endpoint, asked of
// the name servers at most once per topic every 5 s (peers.go). The
// client then opens a session with each set and sends, receives and
// acknowledges at the set that holds the queue; no call but a recall and
// a lite subscription (forward.go, lite.go) is passed from one set to
// another, and each set checks access itself. A topic only other sets serve is routed to them alone. A set without a
// gRPC endpoint, or without a master, is left out, and so are all other
// sets when the name servers cannot be reached: the client then gets this
// set's queues only, as before.
//
// # POP
//
// ReceiveMessage, AckMessage, ChangeInvisibleDuration and
// ForwardMessageToDeadLetterQueue check the client, the group and the
// topic, then call the broker's POP engine, whose state, receipt handles
// and invariants core/broker's doc.go describes. A receive's batch is
// batch_size (default 32, at most 1024), its invisible time
// invisible_duration (default 30 s); auto_renew (a push consumer) makes
// its client the owner of what it gets, kept invisible while its session
// lives, whatever invisible duration it names (the C++ client's 30 s). Long polling lasts the
// request's long_polling_timeout, at most the server's LongPolling, and
// ends 200 ms before the call's deadline (1.5 s before when the request
// names no long polling time, as the Go simple consumer's, so the answer
// crosses a slow network in time) or when the server stops;
// MaxWaiting bounds the receives waiting at once (TOO_MANY_REQUESTS past
// it). A receive that ends empty is MESSAGE_NOT_FOUND; what a client never
// got (its stream broke) is released to be delivered again at once.
//
// # Lite topics
//
// A LITE topic's messages name a lite topic each and are stored in its
// queue (core/broker's lite.go). A lite consumer (client type
// LITE_PUSH_CONSUMER or LITE_SIMPLE_CONSUMER) binds to the LITE topic and
// changes what it subscribes to with SyncLiteSubscription; its receives on
// the LITE topic take from the queues of those lite topics, each
// delivered message naming its lite topic, and its acks, changes of
// invisible time and dead letters name it back. Only lite consumers
// receive from a LITE topic, and only from one. The subscriptions are
// kept per client, in memory, within the quota its settings tell it
// (liteSubscriptionQuota, default 1000); lite.go says how a client's
// whole set, sent every 30 s, and its one-by-one changes are reconciled.
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
// # Transport
//
// The port serves plain HTTP/2 and TLS (both at once when the broker's TLS
// is permissive, tls.go) with fixed flow-control windows, which keep
// grpc-go from pinging a client on every call to estimate bandwidth
// (server.go). grpc-go clients still ping for their own estimate, once
// after every answer when one call is in flight; the acknowledgement of
// such a ping waits up to 5 ms to leave with the next answer instead of
// costing a write system call of its own (pingack.go).
//
// # Invariants
//
//  1. An error becomes a Status code in one place, codes.go: by its
//     kind (errors.Is / errors.As), never by its text.
//  2. At most MaxSessions sessions exist.
//  3. Nothing here writes a message or POP state except through
//     core/broker: sends, commits, dead letters and POP consumption keep
//     the broker's invariants.
package grpcserver
