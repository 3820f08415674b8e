// Package wasm hosts the broker's WebAssembly plugins (ABI v1, defined in
// package sdk/abi) on wazero: message filters, queue-allocation strategies,
// transaction-check policies and (ABI v1.2) transforms of sent messages,
// each a module built with package sdk or any toolchain that follows the
// ABI.
//
// Load turns Options into a *Plugin; a Registry loads a whole plugin list
// (the broker's config) all or nothing and applies later lists as reloads.
// A filter plugin yields a *Filter per subscription expression, which
// satisfies the broker's Filter interface; Allocate and TxnCheck serve the
// other kinds with plain types. No wazero type appears in the API.
//
// # Loading
//
//	read ─▶ size and sha256 check ─▶ declared counts ─▶ compile (file cache)
//	─▶ validate exports and imports ─▶ instantiate (WASI, broker_v1)
//	─▶ _initialize ─▶ broker_init ─▶ broker_info (kinds, body flag)
//	─▶ self-test vectors ─▶ serve
//
// wazero allocates for the counts a module declares (entries of a section,
// locals of a function, elements of a table) before it reads what they
// count, and a failed allocation ends the process. The counts are read
// first (limits.go): a vector may not claim more entries than its section
// has bytes, a function has at most 50,000 locals with its parameters, and
// a module's tables start with at most 10,000,000 elements together, the
// limits browsers apply. Each table the module defines is also given a
// maximum, its share of those 10,000,000 or its minimum if larger, since
// wazero would let a table without one grow to 32 GiB; a table.grow past it
// returns -1, as the specification allows any grow to. Anything else
// malformed is left to wazero.
//
// The start step is _initialize for a WASI reactor (Go's -buildmode=c-shared).
// A module that imports no WASI, as AssemblyScript's output, may instead
// export _start (called in the same place) or neither, when its start
// section runs at instantiation; a WASI module exporting _start is a
// command and is refused.
//
// Every step's failure is an *Error naming the plugin and wrapping one of the
// package's sentinels: ErrHash, ErrModule, ErrABIVersion, ErrKind, ErrInit,
// ErrSelfTest. Compiled code is cached under Options.CacheDir (a Registry's
// CacheDir), so a restart or a reload of an unchanged module skips the
// compiler.
//
// # Sandbox
//
// Each load gets its own wazero runtime with the plugin's memory limit. A
// module may import only broker_v1 (log, now_ms) and the WASI functions Go's
// wasip1 port links; socket functions are refused. No directory is
// preopened, so file access fails; the environment is exactly Options.Env;
// stdout is discarded; stderr is captured per call (its first KiB and last
// 3 KiB) and attached to the error when the call traps. Clocks are real and
// randomness comes from crypto/rand.
//
// # Calls
//
// Instances are pooled per plugin (at most PoolSize, created on demand);
// each serves one call at a time with a reused stack and a guest buffer
// sized once for the largest batch. Inputs are written straight into the
// guest buffer and results read from it, so a filter batch allocates
// nothing on the host. Batches are cut at abi.MaxBatchRecords records or
// abi.MaxBatchBytes bytes; a larger record travels alone.
//
// An untrusted plugin's code is rewritten before it is compiled (see
// instrument in interrupt.go): every loop head (and, for more, every bulk
// memory or table instruction) counts down a budget held in a module
// global, and when it runs out calls back into the host, which
// stops the call if Options.Deadline has passed and otherwise grants the
// next budget of 4096 iterations. That costs a Go guest about a tenth over
// its trusted speed, where wazero's own checks (WithCloseOnContextDone,
// which leave the compiled code at every loop head) cost it four times;
// those are still used for a module the rewriter does not understand,
// with a warning logged. Either way a runaway loop stops shortly after its
// deadline and the goroutine running it reaches the Go scheduler often.
//
// # Failures
//
//	+--------------------+---------------------------+-------------------------+
//	| what happened      | error                     | instance                |
//	+--------------------+---------------------------+-------------------------+
//	| guest status ≠ OK  | ErrFailed, ErrExpression, | kept                    |
//	|                    | ErrKind                   |                         |
//	| unwritten result   | ErrOutput                 | kept                    |
//	| panic, wasm trap,  | ErrTrap (+ stderr)        | closed, replaced after  |
//	| out of memory      |                           | a backoff               |
//	| deadline           | ErrTimeout                | closed, replaced        |
//	| MaxFailures traps  | ErrDisabled on every call | all calls refused until |
//	| or timeouts in row |                           | a reload                |
//	+--------------------+---------------------------+-------------------------+
//
// An error is never a "no match": under PolicyHold a Filter returns it and
// the broker holds the subscription; under PolicyOpen it is counted and the
// failed records match. A failing allocator leaves the previous assignment
// to the caller; a failing transaction policy means UNKNOWN. A failing
// transform refuses the send under PolicyReject (its default) and stores
// the messages as sent under PolicyPass; a rejection by the transform's own
// code is a result (TransformResult.Reject), not a failure.
//
// # Reload
//
// Reload (or Registry.Apply) builds the new module completely, including a
// canary instance that passed init and the module's self-test vectors,
// while the old one serves. The swap is one atomic pointer store; calls
// already running finish on the old instances, and the old runtime closes
// when the last of them returns. A refused reload leaves the old module
// serving.
//
// # Invariants
//
//  1. An instance is used by one goroutine at a time; the pool's semaphore
//     bounds live instances to PoolSize.
//  2. A call that trapped or timed out never returns its instance to the
//     pool.
//  3. A generation's runtime is closed only after it is no longer current
//     and its count of calls in flight is zero.
//  4. Guest output is untrusted: every pointer and length from the guest is
//     bounds-checked, every result byte is checked against the ABI.
//  5. Guest pointers are below 2 GiB because memory is capped at 32768
//     pages, which keeps packed i64 results non-negative.
package wasm
