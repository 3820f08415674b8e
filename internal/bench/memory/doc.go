// Package memory measures the broker's resident memory under the loads
// that size a deployment: `broker bench memory`. It starts the broker as
// a child process (internal/bench/child) on loopback with a fresh data
// directory, drives it over the wire, and after each stage reads the
// broker process's VmRSS and VmHWM from /proc/<pid>/status
// (bench.ProcessMemory), so it runs on Linux only.
//
// # Stages
//
//	+---+-------------------------+---------------------------------------------+
//	| # | stage                   | what the probe does                         |
//	+---+-------------------------+---------------------------------------------+
//	| 1 | idle after start        | nothing: the broker on an empty directory   |
//	| 2 | Conns idle connections  | opens Conns connections, 500 from each of   |
//	|   |                         | 127.0.0.2, 127.0.0.3, ..., each answered    |
//	|   |                         | one GET_MAX_OFFSET, and holds them open;    |
//	|   | connections closed      | then closes them all                        |
//	| 3 | backlog                 | restarts the broker, so its VmHWM is this   |
//	|   |                         | stage's own, then writes Messages messages  |
//	|   |                         | of Size bytes with bench.Produce, batches   |
//	|   |                         | of 32 over 4 × 8 in flight; reads nothing   |
//	|   | restarted on backlog    | stops the broker (SIGTERM) and starts it on |
//	|   |                         | the same directory; notes the time from     |
//	|   |                         | exec to ready and checks the queues' max    |
//	|   |                         | offsets add up to Messages                  |
//	| 4 | held long-polls         | sends Polls PULL_MESSAGEs, 10 per           |
//	|   |                         | connection, spread over the 16 queues of an |
//	|   |                         | empty topic, at each queue's max offset,    |
//	|   |                         | with the suspend and subscription bits and  |
//	|   |                         | a 20 s suspend, so the broker holds them    |
//	+---+-------------------------+---------------------------------------------+
//
// Each reading is taken Options.Settle after its stage is set up. The
// notes give the change of RSS over the stage before, per connection
// and per poll; a poll's figure includes its share of a connection.
//
// # Connections
//
// The broker limits connections per source address (maxConnsPerAddr,
// 1,000 by default) and in all (maxConns, 10,000 or three quarters of
// its open files limit). The probe spreads its connections over loopback
// source addresses, which Linux routes to the loopback interface without
// configuration, and gives the broker a config file that raises maxConns
// to Conns plus 64, so that the probe's control connection and any
// connection still closing do not push a measured one over the limit.
// Everything else is the broker's default. The probe raises its own soft
// limit on open files to what it needs when the hard limit allows; the
// broker inherits it.
//
// The probe's connections are raw: a request frame written with
// remoting.AppendFrame, its response read with remoting.ReadFrame, and
// no client, goroutine or buffer kept for an idle connection, so the
// probe itself stays small beside the broker it measures.
//
// # Invariants
//
//  1. Run stops the broker and removes its directory before it returns,
//     whatever the outcome.
//  2. A stage is recorded only as it says: every idle connection was
//     answered SUCCESS, the backlog was stored whole (every send
//     acknowledged, and after the restart the max offsets add up), and
//     no long-poll was answered before its reading was taken. Otherwise
//     Run fails with ErrProbe.
//  3. Every connection a stage opens is closed when the stage ends, and
//     every goroutine it starts has ended.
package memory
