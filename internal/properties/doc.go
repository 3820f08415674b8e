// Package properties is the codec of the RocketMQ properties string behind
// core/message's Properties (for the broker, the filters and the client). It
// is a leaf: it imports only the standard library, so the filters that
// build on it compile into WASM guests too. The sdk, a module of its own
// that cannot import this one, keeps a copy of the reader; this package's
// tests (TestLookup, FuzzProperties) hold the copy to the same answers.
//
// # Format
//
// A properties string is a run of pairs, each written as
//
//	+-----+------+-------+------+
//	| key | 0x01 | value | 0x02 |
//	+-----+------+-------+------+
//
// with the trailing 0x02 after every pair, the last one included. The whole
// string is at most [MaxLen] bytes, because the stored-message layout keeps
// its length in an int16.
//
// # Invariants
//
//  1. Reading is lenient as the clients are: a piece (up to the next 0x02 or
//     the end) that does not split into exactly one key and one value is
//     skipped, and a key that appears twice yields its last value.
//  2. Reading never allocates; what it returns aliases the input.
//  3. [Encode] is deterministic (keys sorted) and writes only pairs that read
//     back: no empty key or value, no separator byte inside either.
package properties
