//go:build !wasm

package sql92

// scanBytewise selects prefetchPairs, and same's use of the runtime's
// comparison: natively bytes.IndexByte and memequal are vectorised and the
// faster way.
const scanBytewise = false
