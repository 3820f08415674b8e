// Package allocate holds RocketMQ's six queue-allocation strategies as
// pure functions over names: given a consumer group's client ids and a
// topic's queues, which queues does one client consume? The broker's
// QUERY_ASSIGNMENT and our client's rebalance both call it, so both give
// the same answer for the same inputs. It imports only the standard
// library.
//
// Every strategy first sorts copies of its inputs, clients
// lexicographically (duplicates dropped) and queues by topic, broker
// name and queue id ([Compare]), as RocketMQ's clients do before they
// allocate. The examples below use clients a, b, c and queues q0…q7 of
// one broker.
//
// # AVG
//
// Contiguous runs; the first q mod n clients take one more.
//
//	+--------+------------+------------+---------+
//	| client | 8 queues   | 2 queues   | 0 queues|
//	+--------+------------+------------+---------+
//	| a      | q0 q1 q2   | q0         | -       |
//	| b      | q3 q4 q5   | q1         | -       |
//	| c      | q6 q7      | -          | -       |
//	+--------+------------+------------+---------+
//
// # AVG_BY_CIRCLE
//
// Queue i goes to client i mod n.
//
//	+--------+------------+
//	| client | 8 queues   |
//	+--------+------------+
//	| a      | q0 q3 q6   |
//	| b      | q1 q4 q7   |
//	| c      | q2 q5      |
//	+--------+------------+
//
// # CONSISTENT_HASH
//
// Each client puts [DefaultVirtualNodes] points on a 32-bit ring, hashed
// from "clientID-i"; a queue goes to the owner of the first point at or
// after the hash of its [Queue.String], wrapping around. The hash is the
// first four bytes of MD5, big-endian: RocketMQ's default, chosen so the
// ring agrees with the Java clients. Adding or removing a client moves
// only the queues next to its points. The spread is uneven for few
// queues.
//
// # CONFIG
//
// A list fixed at construction ([ByConfig]), returned to every client
// whatever the queues offered. It does not partition: with two clients,
// both consume the list.
//
// # MACHINE_ROOM
//
// Brokers are named "room@name". Only the queues of brokers in the
// consumers' rooms, given to [MachineRoom], are assigned: with p such
// queues, each client takes a run of p/n and the first p mod n clients
// one more from the tail. Queues of other brokers go to nobody.
//
//	rooms [hz]; queues hz@b1:0..2, sh@b2:0..1; clients a, b
//	+--------+------------------+
//	| client | queues           |
//	+--------+------------------+
//	| a      | hz@b1:0 hz@b1:2  |
//	| b      | hz@b1:1          |
//	+--------+------------------+
//
// # MACHINE_ROOM_NEARBY
//
// [MachineRoomNearby] wraps another strategy and two resolvers, a
// queue's machine room and a client's. A room's queues go to the
// consumers of that room by the inner strategy; the queues of a room
// with no consumer go to all consumers by the inner strategy. Its name
// is "MACHINE_ROOM_NEARBY-" and the inner name, as in RocketMQ.
//
//	inner AVG; queues hz:0 hz:1 sh:0 sh:1 bj:0 bj:1; a, b in hz, c in sh
//	+--------+-------------------+
//	| client | queues            |
//	+--------+-------------------+
//	| a      | bj:0 hz:0         |
//	| b      | bj:1 hz:1         |
//	| c      | sh:0 sh:1         |
//	+--------+-------------------+
//
// # Choosing a strategy by name
//
// [ByName] returns AVG, AVG_BY_CIRCLE and CONSISTENT_HASH, which need no
// configuration, for their names in any case. CONFIG, MACHINE_ROOM and
// MACHINE_ROOM_NEARBY carry configuration, so their callers build them
// with [ByConfig], [MachineRoom] and [MachineRoomNearby].
//
// # Invariants
//
//  1. Partitioning: for AVG, AVG_BY_CIRCLE, CONSISTENT_HASH and
//     MACHINE_ROOM_NEARBY over partitioning inner strategies, the union
//     of the results over all clients holds every distinct queue exactly
//     once. MACHINE_ROOM partitions the queues of its rooms and leaves
//     the rest out; CONFIG does not partition.
//  2. Determinism: the result depends on the sets of clients and queues,
//     never on their order or on duplicates, and is sorted by [Compare]
//     without duplicates.
//  3. Balance: under AVG and AVG_BY_CIRCLE (and MACHINE_ROOM within its
//     rooms) two clients' counts differ by at most one.
//  4. A clientID missing from the clients is [ErrNotMember], never a
//     panic; no queues give an empty, non-nil result.
//  5. Allocate neither modifies nor keeps its arguments.
package allocate
