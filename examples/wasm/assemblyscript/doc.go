// Package assemblyscript holds the AssemblyScript plugin examples and the
// tests that build them with the SDK's locked compiler (sdk/assemblyscript,
// after npm ci there) and run them through the broker's own host,
// plugins/wasm, with the assertions the Go examples' tests make:
//
//   - propfilter: a filter over tags, keys and user properties
//     (tag=gold&region=eu, key=k1, !region); its property clauses are held
//     to one table with the Go filter `broker plugin new filter` writes.
//   - guard: a transform that rejects sends lacking a required property and
//     masks JSON string fields of bodies (with the Go jsonmask example's
//     assertions, run on both modules, and the producer's reason for a
//     reject).
//   - cmpfilter: the part of SQL92 that compares properties with literals
//     (a > 50 AND a <= 80 AND color = 'red'), held to the native SQL92
//     filter's answers; BenchmarkFilterCost sets its cost per message
//     beside the native filter's and the SQL92 Go plugin's.
//
// The tests skip without node or the SDK's node_modules, unless
// RMQ_REQUIRE_NODE=1, as CI sets.
package assemblyscript
