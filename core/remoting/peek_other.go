//go:build !unix

package remoting

import "net"

// peekFirstByte cannot peek here; the caller reads the byte instead.
func peekFirstByte(net.Conn) (byte, bool, error) { return 0, false, nil }
