package cluster

import "time"

// SetHandshakeBounds changes the TLS listener's bounds for a test and
// returns a function restoring them.
func SetHandshakeBounds(timeout time.Duration, pending int) (restore func()) {
	d, n := handshakeTimeout, maxHandshakes
	handshakeTimeout, maxHandshakes = timeout, pending
	return func() { handshakeTimeout, maxHandshakes = d, n }
}
