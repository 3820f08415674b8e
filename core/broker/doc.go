// Package broker serves the RocketMQ 4.x broker protocol over a core/store
// Store: topics and groups, sends, long-polling pulls, consumer offsets,
// heartbeats and the consumer table, retries and dead letters, delayed and
// timed messages, orderly queue locks, transactions with check-back, the
// outbox of retry and dead-letter events, and queue assignment.
//
// It speaks the wire through core/remoting (whose types it shares with the
// name server and the clients) and stores through core/store; filters,
// allocation strategies, transaction policies and send transforms come in
// through the small interfaces of ext.go, filter.go and sendtransform.go,
// so it imports no plugin.
//
// A send transform (Options.SendTransform) sees the client's messages of a
// send after they are decoded and before the delay, timer and half-message
// rewrites: it may change their topic, properties and body, or refuse the
// send whole (MESSAGE_ILLEGAL for ErrSendRejected, SYSTEM_ERROR for a
// failure). sendtransform.go checks what it changed (sizes; a new topic
// must exist, be writable and not be the broker's) and picks the new
// topic's queue. Sends to a transformed topic skip the fast path.
//
// # Components
//
// A Broker owns its goroutines and wires these components together; each
// keeps its own state behind its own lock and is handed what it needs when
// it is built (see LOCKING.md for the order):
//
//	+-------------+---------------+------------------------------------------+
//	| component   | file          | owns                                     |
//	+-------------+---------------+------------------------------------------+
//	| topicTable  | topics.go     | topic configs (durable), auto-create     |
//	| clientTable | clients.go    | producers and consumers per group, their |
//	|             |               | connections, subscriptions, expiry; the  |
//	|             |               | connections requests came on (replies)   |
//	| holdTable   | holds.go      | long-polling pulls waiting for messages  |
//	| filterCache | filters.go    | compiled subscription filters, bounded   |
//	| lockTable   | locks.go      | orderly queue locks per group            |
//	| prefilter   | prefilter.go  | SQL92 match masks computed on arrival    |
//	| txnService  | txn.go,       | pending half messages, op markers, the   |
//	|             | txncheck.go   | checker                                  |
//	| schedulers  | schedule.go,  | delay levels and timed messages          |
//	|             | delay.go      |                                          |
//	| outbox      | events.go     | retry and dead-letter events (format in  |
//	|             |               | core/outbox)                             |
//	| adminTable  | admin.go      | the admin command registry               |
//	| popEngine   | pop.go        | POP consumption: cursors, in-flight      |
//	|             |               | messages, receipt handles, waiting       |
//	|             |               | receives, receive attempts               |
//	| liteTable   | lite.go       | the lite topics the store holds, their   |
//	|             |               | quota; lite receives and their listeners |
//	+-------------+---------------+------------------------------------------+
//
// A component gets a logger, a clock, the store or the narrow part of it it
// reads, and callbacks for what it must ask of another component (the
// client table's onExpired releases the expired clients' queue locks; the
// lock table's wakeGroup tells waiting clients to rebalance; the
// transaction service's producers(group) looks up producer connections).
// The Broker runs their periodic sweeps on goroutines it owns.
//
// Request handlers live with the part they serve: send.go and transform.go
// (SEND_MESSAGE, _V2, SEND_BATCH_MESSAGE), pull.go (PULL_MESSAGE, LITE_PULL_MESSAGE),
// clients.go (HEART_BEAT, UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP,
// and CHECK_CLIENT_CONFIG, which a Java SQL92 consumer must pass to start),
// offsets.go, retry.go and dlq.go (CONSUMER_SEND_MSG_BACK, group config,
// dead letters), locks.go (LOCK/UNLOCK_BATCH_MQ), txn.go (END_TRANSACTION),
// assignment.go (QUERY_ASSIGNMENT), reply.go (SEND_REPLY_MESSAGE, _V2,
// and the PUSH_REPLY_MESSAGE_TO_CLIENT that delivers a reply), query.go
// (QUERY_MESSAGE, through the store's key index), stats.go
// (GET_CONSUME_STATS, GET_TOPIC_STATS_INFO, GET_ALL_TOPIC_CONFIG,
// GET_BROKER_RUNTIME_INFO: read-only, each answer bounded by the topic and
// group tables), connections.go
// (GET_CONSUMER_CONNECTION_LIST, GET_PRODUCER_CONNECTION_LIST), relays.go
// (the operator relays to a group's clients: INVOKE_BROKER_TO_RESET_OFFSET
// and the offsets.reset admin command, INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
// GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY), register.go
// (name server registration)
// and admin.go (the admin command framework). metrics.go keeps the
// operators' counters: per-topic traffic and send and pull latency, counted
// on the request paths with atomics only, and Broker.Metrics, a snapshot
// that reads every gauge (lag, held pulls, pending delays and
// transactions) from memory when an exporter asks.
//
// local.go is the face for in-process front ends of another protocol (the
// gRPC endpoint of RocketMQ 5 clients, internal/grpcserver):
// SendLocalBatch and EndLocalTransaction take the send and END_TRANSACTION
// paths without a connection (a batch's messages queued on the store
// together, so they share a group-commit round, as the remoting port's
// fast sends do), DeadLetter the send-back's dead-letter move, CompileFilter
// the filter cache; the Hooks (OnTransactionCheck and OnPull) let the
// front end ask its producers for transaction states and keep a group
// consumed one way. Consumption by POP is the broker's own POP engine
// (pop.go, below), reached through Broker.POP: the front end only
// translates its protocol into the engine's typed calls and the engine's
// errors into its codes.
//
// *Broker itself exports only the lifecycle (Serve, Shutdown, Ready,
// Addr, Metrics), the typed operations above, and topic and group
// administration; what one audience alone needs hangs off a small handle
// (surface.go): View (read-only views), Outbox (events and dead letters,
// for the NATS bridge), Admin (the admin command registry), Hooks
// (what a front end or the plugin host installs) and POP (the POP
// engine, for the gRPC front end). A lint keeps the count
// of *Broker's exported methods at 25 or fewer.
//
// inspect.go holds View's read-only views for in-process tools (the web
// console): group configs and online members, messages by position or
// key, pending delays, timers and transactions. Each is bounded by the
// table it walks or its limit, and none serves a broker-reserved topic.
//
// The broker creates RMQ_SYS_TRACE_TOPIC (TraceTopic) at start unless
// DisableTraceTopic is set: clients tracing with default settings send
// there. It is a client topic, not a system one: clients write and query
// it like any other.
//
// Every walk over a queue goes through the store's queue iterator
// (store.QueueIter), which handles retention gaps, corruption holes and
// unit filters in one place.
//
// # POP
//
// The POP engine (pop.go) serves consumption as RocketMQ 5 clients do it:
// a receive hands out messages of every queue of a topic, each invisible
// for a while under a receipt handle; an ack ends it, a change of
// invisible time moves its deadline, and what is neither comes back when
// its time ends. A front end opens it (POP.Open, with the liveness of its
// clients' sessions) and calls it; a replica's broker never opens it: the
// leader's state is in the replicated store, so a new leader serves the
// flights, cursors and the handles' secret its predecessor replicated.
// The broker itself wakes the engine's waiting receives on arrival
// (Broker.arrived) and drops a deleted topic's POP state (DeleteTopic).
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
//	 or change to 0  ▼     │          new deadline
//	              deliverable again ──► %DLQ%<group> when attempt+1 would
//	                                    exceed the group's retryMaxTimes+1
//
// A push consumer's receive (POPReceive.Owner) makes flights owned by its
// client: while POPOptions.Alive says that client's session lives, a
// passed deadline is renewed (DefaultPOPInvisible more) instead of ending
// the flight, for at most three hours (as RocketMQ's proxy); an explicit change of invisible time
// ends the renewal and, being a failed attempt, waits at least the
// group's retry policy's delay for the attempt. Sessions are not durable,
// so after a restart such flights end at their stored deadline.
//
// A receive first hands out flights whose deadline passed, earliest due
// first (a queue keeps its flights in a heap by deadline, so the flights
// not yet due cost a receive nothing), then new messages from each
// queue's cursor through the filter (tag hash from the
// queue unit, then the record for SQL92), examining at most 4096 units a
// queue. A FIFO group (consumeMessageOrderly) takes nothing new from a
// queue that has a flight. A PRIORITY topic's queue is its messages'
// priority (a send puts a priority message, message.PropertyPriority, in
// queue min(priority, last writable queue), whatever queue the producer
// picked, as RocketMQ does): a receive of a group that is not FIFO goes
// from the highest queue down, each queue's flights due before its new
// messages, so the highest priority with anything deliverable fills the
// batch first and a message given up keeps its priority; of every 100
// such receives only the first priority.factor (a group attribute,
// default 100) do, the others starting one queue further on each time. A
// group new to POP starts where it left off by
// pull, else at a queue's start while its first messages are there, else
// at its tail. The group's consumer offset is kept at the lowest offset
// in flight (else the cursor), found by walking up from the last lowest,
// not by a scan of the flights, so retention, lag and pull consumers see
// what POP consumed. A receive retried with the same attempt id (its
// answer was lost) gets those of its messages still current again, with
// the same handles; the last 4096 attempts are remembered (positions, not
// bodies).
//
// Lite topics (lite.go). A LITE topic's message names a lite topic and is
// stored in that lite topic's one queue, the internal topic
// %LMQ%<parent>%<lite> (LiteQueueTopic), which no client names and the
// name servers never hear of; the first message creates it, within
// MaxLiteTopics (those whose messages retention removed no longer count),
// and deleting the parent deletes them all. A lite consumer's receive
// (POPReceive.LiteTopics) is a receive of each of its lite topics' queues
// under the same rules, delivering each message with its queue's topic
// (POPDelivery.Topic): in order per lite topic for a FIFO group. Its
// waiter is the consumer's listener, which stays registered between its
// receives and hears of news in its lite topics only (an arrival, a FIFO
// queue freed by an ack or a dead letter, a delivery given up or released);
// a look after such news looks at those lite topics alone, and a pass over
// all of them, which goes on where a full batch stopped it, comes first,
// after a subscription changed (POP.LiteChanged) and when an in-flight
// message falls due. So a receive costs what its news costs, not what its
// subscriptions number. A suspended delivery (POP.Suspend) comes back
// after exactly the time asked, at the same attempt.
//
// Index keys (store PutValues, no fsync; group and topic hold no NUL).
// They keep the names of the layout in which the gRPC front end kept
// this state, so data directories and sets of that layout keep working:
//
//	grpc/pop/c/<group>\x00<topic>\x00<queue u32>            → cursor u64
//	grpc/pop/f/<group>\x00<topic>\x00<queue u32><offset u64> → attempt u32,
//	                                                          delivery u64,
//	                                                          deadline ms u64
//	                                         [auto_renew: renew-until ms u64,
//	                                                      owner client id]
//	metadata grpc/pop/secret (fsync'd)                       → 32 random bytes
//
// A receipt handle is base64url (no padding) of 45 bytes:
//
//	+---------+----------+--------+-------------+--------------+----------+
//	| version | queue id | offset | delivery id | deadline ms  | MAC      |
//	| 1 (u8)  | u32      | u64    | u64         | u64 (Unix)   | 16 bytes |
//	+---------+----------+--------+-------------+--------------+----------+
//
// A lite topic's message has version 2 and its lite topic's name (a u8
// length, then the name) between the deadline and the MAC, so that a
// request naming no lite topic (the C# lite consumer's acks) finds its
// queue (HandleLiteTopic). MAC is HMAC-SHA256 under the store's secret
// over "rh/" group NUL topic NUL (the lite topic's queue, for version 2)
// and the bytes before it, truncated. A transaction id
// (POP.TransactionID) is the half message's commit-log offset (u64) and
// a 12-byte MAC under the same secret over "txn" NUL topic NUL and the
// offset, in hex.
//
// # Invariants
//
// Send:
//
//  1. A send is answered after the store appended it, which under the
//     store's sync flush means after the fsync that covers it; a refused
//     send (bad header, system topic, unwritable topic, no such queue, a
//     queue at or above the topic's read queue count, oversize body or
//     properties, a batch over MaxBatchMessages or whose whole body is
//     over MaxMessageSize) stores nothing. No topic is saved with more
//     write queues than read queues, so every stored message sits in a
//     queue that consumers' routes list.
//  2. A batch is stored whole or not at all, at consecutive offsets of one
//     queue. A batch is a SEND_BATCH_MESSAGE, or any send whose header
//     says batch=true (the C++ client sends its batches as
//     SEND_MESSAGE_V2 so).
//  3. A delayed or timed message is stored in the schedule or timer topic,
//     never in its real queue, until it is due; a half message only in the
//     half topic. The answer to such a send names the queue the send asked
//     for (its offset is the parked one). A recalled one is never
//     delivered: Recall writes its tombstone durably before it answers,
//     excluding the scheduler meanwhile (schedMu), and every step that
//     indexes, delivers or rolls a parked message reads the tombstones
//     first. A message the scheduler already delivered is not recalled;
//     the caller is told so (recall.go).
//
// Retry and dead letters:
//
//  4. A CONSUMER_SEND_MSG_BACK stores a new message: in the group's retry
//     topic through the schedule (delay level 3 + reconsume times, or the
//     consumer's level), or, once the reconsume times reach the group's
//     limit or the consumer asks with a negative level, in %DLQ%<group>.
//     The original message is never changed. Its UNIQ_KEY is kept, and
//     ORIGIN_MESSAGE_ID and RETRY_TOPIC point back at it. A group
//     configured with retryQueueNums 0 has no retries: its send-back is
//     answered with success and stores nothing, as in RocketMQ, and no
//     retry topic is created for it.
//  5. A retry or dead letter is stored in the same append as its outbox
//     event (when the outbox is on), so an event exists if and only if its
//     move happened, and a crash keeps both or neither.
//  6. A retried message is delivered only to the group whose retry topic
//     holds it, and re-checked against that group's subscription.
//     Retry and dead-letter topics are created only by the broker, for
//     known groups (a consumer registered by heartbeat, a configured group,
//     or one whose retry topic exists), whatever autoCreateTopic says. A
//     client may send into a retry topic (the official client's fallback),
//     batches included, and the retry rule applies; it may never send
//     into a dead-letter topic, TBW102, the check-max topic or a system
//     topic (NO_PERMISSION), nor send back a record of one.
//
// Long polling:
//
//  7. A pull that finds nothing new and may be held is parked; it is
//     answered when a message arrives on its queue, when its suspend time
//     ends, or when the broker stops, exactly once. A message that lands
//     between the pull's read and its parking is not missed: the queue is
//     checked again once the pull is parked.
//  8. A held pull whose connection closed is dropped, never answered.
//
// Queue locks:
//
//  9. A queue of a group is locked by at most one client id at a time. A
//     lock ends when its holder unlocks it, when it is not renewed within
//     the expiry (60 s), when its holder's connection closes or its
//     registration expires. Clients refused a lock are told to rebalance
//     when it ends.
//  10. While a queue is locked, pulls of that group's other clients get no
//     messages from it.
//
// Transactions (details in txncheck.go):
//
//  11. A half message is resolved by exactly one op marker, stored in the
//     same append as its effect (the committed message, or the copy kept
//     for the next check), so an outcome is written whole or not at all.
//  12. Every unresolved transaction has a record at or after the half
//     queue's progress, and a restart finds every unresolved transaction
//     again; a transaction being checked gets no other marker until the
//     check ends. END_TRANSACTION is accepted only from a connection of
//     the producer group: one registered by heartbeat, or one that sent a
//     half message of the group. VIEW_MESSAGE_BY_ID and QUERY_MESSAGE never
//     serve a record of a system topic (half messages, parked delays,
//     events) or of the check-max topic; QUERY_MESSAGE serves only
//     records of the topic asked for whose KEYS (or UNIQ_KEY) hold the
//     key, whatever the index says.
//
// Offsets and groups:
//
//  13. Topic and group configs are written durably before they are
//     answered. Consumer offsets are checkpoints: a crash may replay the
//     last few seconds of a group's messages, never skip any. An offset is
//     stored only for a valid group name, an existing topic and queue, and
//     a value within [0, the queue's max offset]. UPDATE_CONSUMER_OFFSET
//     sets it; the offset a pull carries only moves it forward, since it
//     is the client's offset when the pull left and a later commit may
//     have been served first (store AdvanceOffset). With
//     autoCreateSubscriptionGroup off (DisableAutoCreateGroup), a consumer
//     group without a configuration registers no consumer, pulls nothing,
//     stores no offset and sends nothing back. DELETE_TOPIC_IN_BROKER
//     removes, with the topic's configuration, its queues and every
//     group's offsets on it durably (store DeleteTopic), then answers its
//     held pulls and drops its pre-filter state; the topic created again
//     starts empty, across restarts. A group's retry and dead-letter
//     topics are topics of their own and stay until deleted by name.
//     With autoCreateSubscriptionGroup on, a consumer group's first
//     accepted heartbeat saves its default configuration (marked
//     autoCreated, which does not cap the consumer's retry limit) while
//     fewer than MaxGroups configurations exist; DELETE_SUBSCRIPTIONGROUP
//     removes it, and with cleanOffset the group's offsets, durably.
//
// Pre-filtering (prefilter.go):
//
//  14. A mask bit answers only for offsets the indexer evaluated while the
//     bit was registered; every other offset is filtered when pulled, so
//     pre-filtering changes what is read, never what is delivered.
//
// Quotas and registration (topics.go, clients.go, register.go):
//
//  15. No client request grows the topic table beyond MaxTopics or the
//     client table beyond MaxGroups groups; at a quota only creation is
//     refused, never a change to what exists. A heartbeat is bounded in
//     groups, each group in subscriptions.
//  16. When a topic change is answered, every name server that answered
//     the registration holds the topic's current configuration; a
//     created or changed topic is sent alone, a deletion re-sends the
//     whole table, and registrations leave in the order of the changes.
//
// Retention (retention.go):
//
//  17. The store's retention never deletes a record the broker will read
//     again itself: a pending delayed or timed message, or a record of an
//     unresolved transaction. Above the disk's high-water mark it deletes
//     no message a consumer group has not consumed, unless the store's
//     diskHighWaterDropsUnconsumed is set. Unconsumed means, for each
//     queue of a topic other than the broker's own (schedule, timer,
//     half, op-half, events, check-max), at or after the lowest offset
//     any group committed on the queue, or the whole queue when no group
//     committed one, not only broadcasting consumers subscribe to the
//     topic (they keep their offsets themselves) and the topic is not the
//     cluster's reply topic (its replies were pushed when stored). Age
//     retention deletes by age.
//  18. A pending timed message holds a segment retention wants gone for
//     at most one retention pass: the scheduler re-appends it, same body
//     and properties, to the tail of the timer topic, and deletes the old
//     index keys once the copy is stored. A crash in between delivers it
//     twice, never loses it. Delayed messages (bounded by the longest
//     level) and transactions (copied forward at each check, bounded by
//     the policy's checks) are not moved.
//
// Request-reply (reply.go):
//
//  19. A reply (SEND_REPLY_MESSAGE, _V2) is stored, as sent and never
//     delayed or held as a transaction, before it is pushed to the
//     connection of the client its REPLY_TO_CLIENT names; the responder
//     is answered success only when the requester accepted the push, and
//     otherwise CONSUMER_NOT_ONLINE naming the requester, with the reply
//     stored once. A reply without REPLY_TO_CLIENT stores nothing. The
//     cluster's reply topic, <cluster>_REPLY_TOPIC, exists from startup
//     and cannot be deleted; clients may send to it (it is not reserved).
//
// Operator relays (relays.go):
//
//  20. An offset reset stores the group's new offsets before any consumer
//     is told, so a group with no consumer online resumes from them, and
//     a consumer told resumes from what is stored. Without isForce no
//     offset moves forward. Only a known group (a configuration, a live
//     consumer or committed offsets) is reset, and only within each
//     queue's offsets. Every relay to a client is answered within the
//     relay timeout (4 s) with the client's answer, CONSUMER_NOT_ONLINE
//     or an error naming the client and group, and at most 64 relays
//     wait at once (SYSTEM_BUSY beyond).
//
// Restarts (resume.go):
//
//  21. A consumer group's subscriptions (and model) are written to the
//     store whenever they change, deleted when its last member leaves, and
//     loaded at start: a restarted broker serves a group's pulls with the
//     subscriptions its members last declared, before they heartbeat
//     again, and forgets the group if nobody does within ClientExpiry. A
//     restored group has no members until they heartbeat. A pull is never
//     served with a filter the group did not declare; a member that
//     declares another replaces it with its heartbeat.
//  22. From the start of a graceful shutdown every pull is answered
//     SYSTEM_BUSY, held ones at once, and while consumers are connected the
//     broker keeps reading their connections for a short grace (pullGrace)
//     before it stops: no pull a consumer sends then goes unanswered.
//  23. A replica (Options.ReplicaID above 0, replica.go) writes nothing to
//     its store: it refuses every request code that writes with
//     NO_PERMISSION, ignores the commit carried by a pull, creates no
//     group config at a heartbeat and no topic at startup, and runs none
//     of the services that write (delays, timers, transaction checks,
//     pre-filtering, subscription snapshots, the outbox). Its topic table
//     is read again from the store before each registration, and
//     EnsureTopic reads a topic missing from it from the store (one the
//     leader created since) instead of creating it. Its refusals name
//     the set's leader (Options.Leader).
//  24. A master whose store stopped leading its set (store.ErrNotLeader:
//     the member lost its majority or another member was elected, and
//     the broker has not switched to replica yet) answers writes with
//     SERVICE_NOT_AVAILABLE, which the official clients retry on another
//     broker, naming the leader, logged at debug level and rate-limited:
//     a failover is routine, not a system error.
//
// POP (pop.go):
//
//  25. A receipt handle is accepted only if its MAC verifies for the
//     call's group and topic, its flight exists, its delivery id is the
//     flight's current one and the flight's deadline has not passed. So a
//     handle acknowledges at most one delivery: a later delivery, a
//     changed invisible time, an ack or a dead-letter move each make it
//     ErrBadReceiptHandle. The secret is the store's, so a handle stays
//     valid across restarts and a set's change of leader.
//  26. A cursor is written in the same index batch as the flights of the
//     messages it passed, so after a crash no message is past the cursor
//     without being in flight: what was in flight is delivered again
//     after its deadline (at least once); an acknowledged message's flight
//     is deleted before the ack returns, and it is never delivered again
//     unless the crash loses the unsynced deletion too. An ack of several
//     handles (POP.AckAll) deletes their flights in one index batch per
//     1,024 handles (on a set, one entry of its log) and commits each
//     queue's offset once per batch.
//  27. A delivery's attempt is 1 on the first delivery and grows by one
//     on each redelivery; the message due for attempt retryMaxTimes+2 is
//     stored in %DLQ%<group> (with its outbox event, invariant 5) and its
//     flight ends.
//  28. A waiting receive returns when a message arrives on its topic,
//     when a flight's deadline passes (a change of invisible time that
//     moves a deadline of its group before the receive's wake-up wakes it
//     to sleep until the new one), when a queue of a FIFO group has
//     nothing in flight any more, when its Until passes, when its Stop
//     closes or its context ends; at most POPOptions.MaxWaiting receives
//     wait at once. A lite receive returns on the same events of its lite
//     topics and when what its consumer subscribes to changes; news of a
//     lite topic between two receives of a consumer reaches the second.
package broker
