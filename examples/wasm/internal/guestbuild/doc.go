// Package guestbuild builds the example plugins from source for their tests:
// each test compiles its own example exactly as an operator would
// (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared for Go; the SDK's
// locked asc for AssemblyScript) and loads the result through plugins/wasm.
// A module is built once per test process and kept in memory; no .wasm file
// is left on disk.
package guestbuild
