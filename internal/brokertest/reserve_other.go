//go:build !unix

package brokertest

// reservePort reserves nothing where file locks are not at hand: ports
// are still never handed out twice in one process.
func reservePort(int) bool { return true }
