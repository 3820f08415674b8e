// Command plugincheck loads a plugin module the way the broker does (ABI
// checks, init with its config, self-test vectors) and, for a filter,
// compiles the given expressions, then prints what the broker would report
// about it. It is the quick check between building a module and naming it
// in the broker's config:
//
//	go run ./examples/wasm/plugincheck -kind filter -expr 'region=eu' jsonfield.wasm
package main
