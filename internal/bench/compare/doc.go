// Package compare runs this broker and NATS JetStream side by side on one
// machine under matching loads and tabulates the two: `broker bench
// compare`. Each system runs as a child process on loopback with file
// storage in a fresh temporary directory; this broker is driven by
// internal/bench in this process, JetStream by `nats bench`, each load
// generator sharing the machine's cores with its server as the other does.
//
// # Tools
//
// nats-server and the nats CLI are built with `go install module@version`
// into Options.CacheDir, a directory per module and version, and reused
// while the binary there carries that module and version in its build
// information. nats-server's version is go.mod's (DefaultNatsServerVersion,
// kept equal by a test); the CLI's is DefaultNatsCLIVersion. This broker is
// the executable in Options.Broker, normally the running `broker` itself,
// so `go run ./cmd/broker bench compare` measures the working tree.
//
// # Pairings
//
// Messages are Options.Size bytes (1 KiB). Produce runs last
// Options.Duration on this broker; `nats bench` sends a count of messages
// rather than for a time, so each JetStream run sends what the previous
// run of the pairing managed in Duration (a guess for the first).
//
//	+---+-------------------------+------------------------------+--------------------------------+
//	| # | pairing                 | rmq-go                       | JetStream                      |
//	+---+-------------------------+------------------------------+--------------------------------+
//	| 1 | request/response        | --flush sync,                | lazy fsync, js pub sync        |
//	|   |                         | 64 conns × 1 in flight       | --clients 64                   |
//	| 2 | pipelined, our fsync    | --flush sync,                | lazy fsync, js pub async       |
//	|   | before ack vs lazy      | 4 conns × 128 in flight      | --clients 4 (batch 500)        |
//	| 3 | pipelined, both lazy    | --flush async,               | as 2                           |
//	|   |                         | 4 conns × 128 in flight      |                                |
//	| 4 | fsync before every ack  | as 1                         | sync_interval: always,         |
//	|   |                         |                              | js pub sync --clients 64       |
//	| 5 | batched produce         | --flush sync, 64 × 1,        | lazy fsync, js pub fast        |
//	|   |                         | --batch 32                   | --batch 32 --clients 64        |
//	| 6 | catch-up consume        | ConsumeCount written, then   | ConsumeCount written by js pub |
//	|   |                         | bench consume reads them     | async, then js ordered reads   |
//	| 7 | latency at half load    | as 1 at half of 1's median   | as 1 at half of 1's median     |
//	|   |                         | rate (--rate)                | rate (--throughput)            |
//	+---+-------------------------+------------------------------+--------------------------------+
//
// compare.go says why pairing 5 uses JetStream's fast batch publisher
// rather than its atomic one.
//
// # Measurement
//
//   - msgs/s is each load generator's own figure: messages acknowledged
//     (or read) over the time from its first request to its last response.
//   - Server CPU is the server process's user+system time from
//     /proc/<pid>/stat, read before and after the measured part, divided
//     by the messages it moved. For this broker the window is the bench's
//     clock (bench.Options.BrokerPID); for JetStream it is the whole `nats
//     bench` command, so it also holds the command's connects and stream
//     creation, a few milliseconds against seconds of load. Without /proc
//     (not Linux) the column says n/a.
//   - p50 and p99 are shown where both sides time single messages from
//     send to acknowledgement: pairings 1, 4 and 7. JetStream's async and
//     batch publishers time whole batches, so their figures would not
//     compare.
//   - The table gives the median of the rounds with the minimum and
//     maximum, and the ratio of the medians, rmq-go over JetStream.
//
// # Protocols
//
// RunProtocols (`broker bench protocols`) pairs this broker with itself:
// the same load over the remoting protocol and over gRPC, each run on a
// fresh broker with both ports open (--flush sync), the protocol going
// first alternating by round. Load 1 is sends, 64 connections × 1 in
// flight, one message a request; load 2 reads back ConsumeCount messages
// written over remoting, by catch-up pulls (one puller per queue, 8) or
// by 8 POP receivers, each receive of 32 acknowledged in one AckMessage.
// The table gives msgs/s and broker CPU per message with gRPC's ratio to
// remoting, and p99 for the sends.
//
// # Invariants
//
//  1. Every measured run starts its server on an empty directory and stops
//     it, and removes the directory, before the next run starts, whether
//     the run succeeded or not.
//  2. Within a pairing the two systems alternate, and the one that goes
//     first alternates by round, so neither always runs on a machine the
//     other has just warmed or dirtied.
//  3. A server's process is stopped with SIGTERM and killed only after
//     child.DefaultStopTimeout (internal/bench/child starts and stops
//     them); Run returns only once every child it started has
//     exited.
package compare
