// Command sql92 is the broker's SQL92 filter (package filters/sql92)
// compiled as a WebAssembly plugin: the same parser and evaluator the
// broker runs natively, behind the plugin ABI. It proves the SDK runs real
// code, and it lets an operator pin or replace the SQL92 implementation
// (the expression type SQL92 can be mapped to a plugin) without rebuilding
// the broker.
//
// Each distinct expression is compiled once per instance (the SDK caches
// it); each message is evaluated against its properties in place. The
// matcher names the properties its expression refers to
// (sdk.PropertyReader), so the broker sends only those.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o sql92.wasm .
package main
