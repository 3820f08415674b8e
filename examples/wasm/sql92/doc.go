// Command sql92 is the broker's SQL92 filter (package filters/sql92)
// compiled as a WebAssembly plugin: the same parser and evaluator the
// broker runs natively, behind the plugin ABI. It proves the SDK runs real
// code, and it lets an operator pin or replace the SQL92 implementation
// (the expression type SQL92 can be mapped to a plugin) without rebuilding
// the broker.
//
// Each distinct expression is compiled once per instance (the SDK caches
// it). The matcher names the properties its expression refers to
// (sdk.PropertyReader) and the filter asks for their values resolved
// (sdk.ValueFilter, ABI v1.4), so the broker looks them up and the guest
// evaluates the expression over those values (sql92.Expr.EvalValues)
// without scanning any properties. With the config "properties" it takes
// the named properties as pieces of the properties string instead and
// scans them, as before ABI v1.4, which is there to compare the two.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o sql92.wasm .
package main
