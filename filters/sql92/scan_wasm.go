package sql92

// scanBytewise selects prefetchBytewise, and same's loop: in WebAssembly a
// call to bytes.IndexByte or to the runtime's memequal costs more than
// looping over a short piece.
const scanBytewise = true
