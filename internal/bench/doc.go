// Package bench is the load generator behind `broker bench produce` and
// `broker bench consume`. It drives a broker only over the wire, with
// core/remoting clients, exactly as RocketMQ clients do, or under
// ProtocolGRPC with RocketMQ 5's gRPC client (internal/rmqpb), so it
// measures any broker that speaks the protocol: this one, a Java broker
// (or Apache's proxy), or a build of this one under test. It never
// imports the broker, the store or the name server.
//
// [Produce] creates a topic and sends messages to it from many connections
// at once, optionally paced to a rate; [Consume] reads a topic back from
// each queue's min offset to the max offset it had at the start. Both print
// a progress line per interval and return a [Summary]: message and byte
// rates, errors, and latency percentiles from a [Histogram].
//
// # Requests
//
// Setup, before the clock starts (a failure ends the run with an error):
//
//	+------+-------------------------+------------------------------------------+
//	| code | request                 | extFields                                |
//	+------+-------------------------+------------------------------------------+
//	|  17  | UPDATE_AND_CREATE_TOPIC | topic, defaultTopic=TBW102,              |
//	|      | (Produce)               | readQueueNums=writeQueueNums=Queues,     |
//	|      |                         | perm=6, topicFilterType=SINGLE_TAG,      |
//	|      |                         | topicSysFlag=0, order=false              |
//	|  30  | GET_MAX_OFFSET          | topic, queueId. Produce sends one per    |
//	|      |                         | connection so the dials happen before    |
//	|      |                         | the clock starts; Consume one per queue. |
//	|  31  | GET_MIN_OFFSET          | topic, queueId (Consume, one per queue)  |
//	+------+-------------------------+------------------------------------------+
//
// SEND_MESSAGE (10), when Batch is 1, carries the header the Go client
// sends, every value a string:
//
//	+-----------------------+-------------------------------------------------+
//	| key                   | value                                           |
//	+-----------------------+-------------------------------------------------+
//	| producerGroup         | Group                                           |
//	| topic                 | Topic                                           |
//	| defaultTopic          | TBW102                                          |
//	| defaultTopicQueueNums | 4                                               |
//	| queueId               | round robin over the Queues, shared by workers  |
//	| sysFlag               | 0 (bodies are never compressed)                 |
//	| bornTimestamp         | wall clock, ms                                  |
//	| flag                  | 0                                               |
//	| properties            | TAGS=bench, UNIQ_KEY=a fresh id per message     |
//	| reconsumeTimes        | 0                                               |
//	| unitMode              | false                                           |
//	| maxReconsumeTimes     | 0                                               |
//	| batch                 | false                                           |
//	+-----------------------+-------------------------------------------------+
//
// SEND_BATCH_MESSAGE (320), when Batch is more than 1, carries the same
// values under the one-letter V2 keys a (producerGroup) to m (batch=true),
// with i (properties) empty, and a body of Batch entries in the layout of
// core/message's batch body, each with the same properties as a single
// message. The Go client leaves UNIQ_KEY out of batch entries and the Java
// client puts it in; the bench follows Java, so the broker's id handling is
// part of what is measured.
//
// PULL_MESSAGE (11): consumerGroup=Group, topic, queueId, queueOffset,
// maxMsgNums=min(PullBatch, what is left of the queue), sysFlag=4,
// commitOffset=0, suspendTimeoutMillis=0, subscription=*, subVersion=0,
// expressionType=TAG. The sysFlag has only the subscription bit: the
// subscription comes with the request, so no heartbeat has to register the
// group first; without the suspend bit a caught-up queue answers at once
// instead of being held; without the commit bit no consumer offset is
// written. SUCCESS bodies are split and validated with
// message.DecodeRecords; the next pull starts at nextBeginOffset.
// PULL_NOT_FOUND ends the queue, PULL_RETRY_IMMEDIATELY moves on to
// nextBeginOffset, PULL_OFFSET_MOVED counts as an error and moves on too.
//
// # gRPC (RocketMQ 5)
//
// Under ProtocolGRPC each of Conns connections is a grpc.ClientConn of its
// own with a client id of its own (x-mq-client-id, x-mq-protocol v2), and
// does before the clock starts what a 5.x client does before its first
// request: it opens the Telemetry stream, sends Settings (PRODUCER of the
// topic, or SIMPLE_CONSUMER of the group with the subscription *), waits
// for the answer, and keeps the stream open for the run; then it asks
// QueryRoute for the topic. gRPC has no request that creates a topic, so
// Produce first creates it over remoting at Options.Admin (by default
// Broker's host, port 10911), as above.
//
// Produce keeps Conns×InFlight SendMessage calls outstanding, a goroutine
// per call (gRPC's unary calls block), each carrying Batch NORMAL messages
// with the tag bench, a fresh message_id each, born_timestamp and
// born_host; the broker picks the queue. A message counts when its entry's
// status is OK.
//
// Consume is POP: Conns×InFlight receivers, each looping ReceiveMessage
// (the whole topic, filter TAG *, batch_size PullBatch, invisible 30 s,
// long polling 0, so a group with nothing left is answered
// MESSAGE_NOT_FOUND at once) and one AckMessage of everything received.
// A receive and its ack are one request of the summary; a message counts
// once its ack is OK. A receiver stops at MESSAGE_NOT_FOUND: the group
// has caught up. POP consumption is the group's: what a run acknowledged
// a later run of the group does not get, so give each run a new Group to
// read the topic from its start. Timeouts are each call's deadline.
//
// # Measurement
//
// Produce runs one worker per connection, which keeps InFlight requests
// outstanding with remoting.Client.InvokeAsync: each is built in a
// sendState of its own, and its callback, on the connection's reader
// goroutine, counts it and hands the sendState back. No goroutine waits per
// request, so the generator spends on a pipelined request little more than
// its encoding and its share of the syscalls. Consume runs one worker per
// queue, at most Conns×InFlight, since a queue's pulls follow one another;
// each sends one pull at a time with Invoke.
//
//   - Latency is per request, from handing it to the client to reading its
//     response (Produce: to the callback, which runs as soon as the
//     response is decoded). Workers share at most 16 Histograms round
//     robin, merged for progress lines and the summary, so their memory
//     (about 31 KiB each) does not grow with Conns×InFlight. Requests
//     answered with an error code are included.
//   - Messages counts messages the broker acknowledged (Produce) or returned
//     (Consume); Bytes counts their bodies; MB/s is in 10^6 bytes per second.
//   - Elapsed runs from the first request to the last response, so setup
//     and dials are outside it.
//   - Broker CPU, when Options.BrokerPID names the broker's process on
//     this machine, is its user plus system time from /proc/<pid>/stat
//     read just before the clock starts and after the last response; the
//     summary divides it by Messages. /proc counts in 10 ms ticks, so the
//     figure needs runs of seconds. `broker bench` finds the pid itself
//     when --broker is a loopback address (ListenerPID), or takes
//     --broker-pid. ProcessMemory reads a process's resident memory
//     from /proc/<pid>/status the same way, for `broker bench memory`
//     (internal/bench/memory).
//   - The rate is the run's: when responses are slow, paced workers fall
//     behind the schedule rather than open more requests (the closed-loop
//     model of most load generators), and latency does not include the time
//     a request waited for its slot.
//
// # Pacing and timeouts
//
// Rate is kept by one pacer shared by all workers, a token bucket written
// as a schedule of slots (see pacer). A run that falls behind may catch up
// by at most 10 ms of slots at once. The pacer reads a clock interface so
// tests run it on virtual time and count requests instead of timing them.
//
// Each request is bounded by Timeout: Produce's by InvokeAsync's timeout,
// Consume's through a watchdog goroutine that cancels the worker's context
// when its request has waited too long, rather than a context with a
// deadline per request, which would cost a timer and several allocations
// per pull.
//
// # Invariants
//
//  1. Every goroutine a run starts has ended when Produce or Consume
//     returns, and every client is closed.
//  2. Each request counts once in Requests: answered or failed. A request
//     cut short by the caller's context does not count.
//  3. A request's extFields and body are reused only once the client has
//     encoded them: after Invoke or InvokeAsync has returned. A batch
//     body whose call failed without a response is dropped, since the
//     connection may still hold it unsent; the single-message body is
//     shared by all workers and never written after setup.
//  4. Under Count, Produce attempts exactly Count messages (the last batch
//     may be short) and Consume reads at most Count.
//  5. Over any window W, a paced run sends at most Rate×(W+10 ms) messages
//     plus one request's worth.
//  6. A Histogram uses fixed memory; each percentile it reports is at least
//     the true one and within 1/128 of it (exact below 256 ns), and Max is
//     exact.
package bench
