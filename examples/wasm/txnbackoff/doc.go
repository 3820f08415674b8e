// Command txnbackoff is a broker transaction-check policy plugin: it asks
// producers about a half message with exponential backoff and gives up
// after a number of checks.
//
// Check k (counting from 0) is due base·(2^0 + 2^1 + … + 2^k) after the
// message was stored, each step capped at cap; before that the policy says
// wait, after it check now. A message checked max times is discarded (or
// rolled back, with giveup=rollback). A CHECK_IMMUNITY_TIME_IN_SECONDS
// property set by the producer delays the first check further.
//
// The config is space-separated key=value words, all optional:
//
//	max=15 base=6s cap=1m giveup=discard
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o txnbackoff.wasm .
package main
