// Package child runs a server under measurement as a child process: the
// benchmarks that look at a server from outside (its CPU time, its
// resident memory) start it with Start, learn from its log when it
// accepts clients and on which address, and end it with Stop.
//
// A server is ready when one of its output lines has matched
// Readiness.Addr (whose first submatch is the client address) and the
// same or a later line matches Readiness.Ready, and a TCP dial to that
// address then succeeds. BrokerReady describes this project's broker.
//
// # Invariants
//
//  1. Start returns either a ready Process or an error; after an error the
//     child it started has exited.
//  2. Stop sends SIGTERM and kills the child only if it has not exited
//     after Options.StopTimeout; it returns once the child has exited, and
//     is safe to call again.
//  3. The package never removes or creates files: the caller owns the
//     server's directory, so a server can be stopped and started again on
//     the same data.
package child
