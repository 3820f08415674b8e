//go:build unix

package sniff

import (
	"errors"
	"io"
	"net"
	"syscall"
)

// FirstByte returns the first byte nc will read without consuming it,
// so a plain connection can be served as the *net.TCPConn it is (keeping
// vectored writes); ok is false when nc cannot peek, and the caller reads
// the byte instead. It honours nc's read deadline.
func FirstByte(nc net.Conn) (b byte, ok bool, err error) {
	sc, isSys := nc.(syscall.Conn)
	if !isSys {
		return 0, false, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var buf [1]byte
	var n int
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		n, _, rerr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK)
		return !errors.Is(rerr, syscall.EAGAIN) && !errors.Is(rerr, syscall.EINTR)
	})
	if err != nil {
		return 0, true, err
	}
	if rerr != nil {
		return 0, true, rerr
	}
	if n == 0 {
		return 0, true, io.EOF
	}
	return buf[0], true, nil
}
