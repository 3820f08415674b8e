package sql92

// scanBytewise selects prefetchBytewise: in WebAssembly a call to
// bytes.IndexByte costs more than looping over a short piece.
const scanBytewise = true
