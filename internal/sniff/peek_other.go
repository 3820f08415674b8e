//go:build !unix

package sniff

import "net"

// FirstByte cannot peek here; the caller reads the byte instead.
func FirstByte(net.Conn) (byte, bool, error) { return 0, false, nil }
