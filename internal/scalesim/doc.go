// Package scalesim measures what a cluster of many broker sets costs the
// parts that every set shares, and models what each set costs itself. It
// backs docs/scale.md.
//
// Three models, one per file:
//
//   - namesrv.go starts a real name server (core/namesrv) on 127.0.0.1:0
//     and drives N simulated broker sets against it over TCP with the
//     remoting protocol: each set's master sends the same REGISTER_BROKER
//     a broker sends (a remoting.RegisterBrokerBody encoded as JSON), and
//     clients send GET_ROUTEINFO_BY_TOPIC. It reports bytes per
//     registration and per route, CPU per registration and per route
//     query, and the live heap the name server's tables take.
//   - rebalance.go runs core/allocate's strategies over N sets' queues and
//     C consumers: CPU per client per rebalance, and how many queues change
//     owner when one consumer joins or leaves.
//   - raft.go is arithmetic: what replicating one set's commit log with
//     raft sends, per set.
//
// # CPU accounting
//
// The name server and its simulated peers share one process, so process
// CPU per request counts both ends and the loopback network. The harness
// also runs the same requests against a bare remoting server that answers
// at once with a canned response of the same size (the floor); the name
// server's own work is the difference.
//
// # Invariants
//
//  1. A registration request has the shape core/broker sends: the same
//     header fields, and a body that is json.Marshal of
//     remoting.RegisterBrokerBody (unsigned: no ACL fields).
//  2. A route answer is checked before it is counted: it names every set
//     once, with its master address and the topic's queue counts.
package scalesim
