// Command sticky is a broker allocation-strategy plugin: sticky-by-hash
// with bounded load. Every queue goes to the client that ranks highest for
// it by rendezvous hashing (a hash of the queue and the client id), unless
// that client already holds its share, ceil(queues/clients); then to the
// next one. Queues are placed in an order fixed by their own hash, so the
// result depends only on the set of clients and queues.
//
// When a client joins or leaves, most queues keep their owner: only the
// queues of the leaving client, or the share the new one takes, move (plus
// a few when the bound pushes a queue further down its ranking). Every
// client computes the same assignment from the same input, so their shares
// never overlap.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o sticky.wasm .
package main
