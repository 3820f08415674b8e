// Package client is a Go client for RocketMQ 4.x brokers (this project's
// broker, and any broker that speaks the remoting protocol): producers,
// push consumers and lite pull consumers. It imports only core/remoting,
// core/message, core/allocate and the standard library.
//
// # Shape
//
// Producers and consumers are created from plain Options structs (zero
// means default) and share one client instance per client id
// (ClientIP@InstanceName): one connection per broker and name server, one
// route table refreshed every 30 s, and one heartbeat every 30 s that
// carries every producer and consumer group of the instance. Give each
// producer or consumer its own InstanceName to keep them apart.
//
// # Where each mechanism lives
//
//	+----------------------------+----------------------+-----------------------------------------------+
//	| mechanism                  | file                 | type or function                              |
//	+----------------------------+----------------------+-----------------------------------------------+
//	| shared instance            | instance.go          | instance, acquireInstance / release           |
//	| routes (30 s)              | route.go             | topicRoute, instance.updateRoute              |
//	| heartbeats (30 s)          | instance.go          | instance.heartbeat                            |
//	| broker requests            | brokerapi.go         | instance.pull, lockBatch, sendBack, ...       |
//	| producer, selectors        | producer.go          | Producer, QueueSelector                       |
//	| fault avoidance            | fault.go             | faultTracker                                  |
//	| transactions               | transaction.go       | TransactionListener, checkTransaction         |
//	| compression                | message.go           | deflate / inflate (zlib, sysFlag bit 0x1)     |
//	| pull service               | push.go              | PushConsumer.pullLoop (one pull per queue)    |
//	| flow control               | flowcontrol.go       | flowControl.check                             |
//	| process queue              | processqueue.go      | processQueue                                  |
//	| concurrent consume service | consume.go           | consumeConcurrently, settle, resubmitLater,   |
//	|                            |                      | sweepExpired (the 15-minute expiry sweep)     |
//	| orderly consume service    | consume.go           | consumeOrderly, settleOrderly, renewLocks     |
//	| rebalancing (20 s, notify) | rebalance.go         | rebalancer, queueTable                        |
//	| allocation strategies      | allocate.go          | AllocateStrategy over core/allocate           |
//	| offset stores              | offsetstore.go       | remoteOffsetStore, localOffsetStore           |
//	| lite pull consumer         | litepull.go          | LitePullConsumer                              |
//	| operator relays (220, 221, | relays.go            | instance.serveRelay; resetOffsets,            |
//	| 307, 309)                  |                      | runningInfo, consumeDirectly of both consumers|
//	+----------------------------+----------------------+-----------------------------------------------+
//
// # Consuming
//
// A push consumer holds the queues its rebalance gives it. For each it
// runs one puller: a long-polling PULL_MESSAGE (the broker holds it up to
// 20 s), which carries the subscription, so a broker that restarted and
// has not yet seen this client's heartbeat still serves it. Pulled
// messages go into the queue's process queue (ordered by offset) and to
// the consume service. Flow control pauses a puller for 50 ms at a time
// while its queue caches more than 1000 messages or 100 MiB, or (when
// consuming concurrently) spans more than 2000 offsets; nothing is ever
// dropped.
//
// The concurrent service calls the handler with up to ConsumeBatchSize
// messages from ConsumeGoroutines goroutines. On ConsumeSuccess the
// messages up to the context's AckIndex are done; the others, and every
// message on ConsumeRetryLater, are sent back to the broker
// (CONSUMER_SEND_MSG_BACK) with the context's delay level, and come back
// through the group's retry topic with their original topic restored. A
// message whose send-back fails is consumed again locally after 5 s. A
// message still in a handler after ConsumeTimeout (15 min) is sent back
// with delay level 3 by the expiry sweep, so one stuck call cannot hold
// its queue's offset.
//
// The orderly service consumes each queue in one goroutine at a time and
// only while this client holds the queue's lock at the broker (taken
// before the queue is taken up, renewed every 20 s, released when the
// queue is given up). OrderlySuspend puts the messages back at the head
// of the queue and consumes them again after SuspendTime; past
// MaxReconsumeTimes they go to the dead-letter topic. With AutoCommit
// off, OrderlyCommit commits what was consumed since the last commit and
// OrderlyRollback consumes it again.
//
// # Offsets
//
// The offset to commit for a queue is the smallest offset still in its
// process queue, or one past the largest offset seen when it is empty:
// a message is never committed past while it is unconsumed. Clustering
// consumers commit to the broker (only forward, every 5 s, when a queue is
// given up, and at shutdown). Every round sends each held queue's offset,
// changed or not, as the official clients do: a broker that lost its last
// offset checkpoint in a crash, or served an older commit late, is put
// right. Each pull carries the offset too; this project's broker lets a
// pull only move it forward. Broadcasting consumers keep offsets in a
// local file, written atomically with a backup of the previous version.
//
// # Rebalancing
//
// Every 20 s, and at once when the broker sends
// NOTIFY_CONSUMER_IDS_CHANGED, each subscribed topic is rebalanced. A
// clustering consumer asks a broker for its assignment (QUERY_ASSIGNMENT,
// under the strategy configured for the group at the broker) unless
// ConsumerOptions.ClientAllocation is set or the broker does not serve it;
// otherwise it lists the group's consumers and allocates with its own
// Strategy. The broker and the client share core/allocate, so both give
// the same assignment for the same inputs. A queue given up has its
// offset committed (and, when orderly, its lock released); a queue taken
// up starts at the group's committed offset, else where ConsumeFrom says.
// A rebalance that could not settle a topic (a broker that did not answer,
// an offset that could not be read) keeps what the consumer holds and runs
// again after 1 s, then every 2 s while it keeps failing, each time after
// a heartbeat: a broker that restarted knows the client only from one, and
// until then assigns it nothing.
//
// # Invariants
//
//  1. At most one pull per held queue is outstanding.
//  2. A committed offset never passes a message that is still in a
//     process queue, except through the expiry sweep, which sends that
//     message back first.
//  3. Offsets committed to the broker only move forward, except by Seek.
//  4. An orderly queue's handler runs in one goroutine at a time, and only
//     while its lock is held and not expired (30 s without renewal).
//  5. Every goroutine is owned: the instance's loops by the instance, a
//     consumer's pullers, workers and timers by the consumer; Shutdown
//     waits for them.
package client
