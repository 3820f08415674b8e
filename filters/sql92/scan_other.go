//go:build !wasm

package sql92

// scanBytewise selects prefetchPairs: natively bytes.IndexByte is
// vectorised and the faster way to split properties.
const scanBytewise = false
