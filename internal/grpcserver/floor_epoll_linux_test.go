//go:build linux

package grpcserver_test

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/rmq-go/rmq/core/remoting"
)

// serveEpollFloor serves the do-nothing remoting server of serveFloor
// on level-triggered epoll loops of its own instead of Go's net package:
// one read per readiness, no read that finds the socket empty, and the
// answers to one read written in one write. It returns the address.
func serveEpollFloor(loops int) (string, error) {
	lfd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	if err := unix.Bind(lfd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return "", err
	}
	if err := unix.Listen(lfd, 1024); err != nil {
		return "", err
	}
	sa, err := unix.Getsockname(lfd)
	if err != nil {
		return "", err
	}
	port := sa.(*unix.SockaddrInet4).Port
	eps := make([]int, loops)
	for i := range eps {
		if eps[i], err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
			return "", err
		}
		go epollLoop(eps[i])
	}
	go func() {
		pfd := []unix.PollFd{{Fd: int32(lfd), Events: unix.POLLIN}}
		for n := 0; ; {
			if _, err := unix.Poll(pfd, -1); err != nil && err != unix.EINTR {
				return
			}
			for {
				fd, _, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
				if err != nil {
					break
				}
				_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
				ep := eps[n%len(eps)]
				n++
				_ = unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)})
			}
		}
	}()
	return fmt.Sprintf("127.0.0.1:%d", port), nil
}

type epollConn struct {
	in  []byte
	out []byte
}

func epollLoop(ep int) {
	conns := map[int32]*epollConn{}
	events := make([]unix.EpollEvent, 128)
	buf := make([]byte, 64<<10)
	var off int64
	for {
		n, err := unix.EpollWait(ep, events, -1)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			return
		}
		for _, ev := range events[:n] {
			c := conns[ev.Fd]
			if c == nil {
				c = &epollConn{}
				conns[ev.Fd] = c
			}
			r, err := unix.Read(int(ev.Fd), buf)
			if r <= 0 {
				if err == unix.EAGAIN {
					continue
				}
				unix.Close(int(ev.Fd))
				delete(conns, ev.Fd)
				continue
			}
			c.in = append(c.in, buf[:r]...)
			p := c.in
			for len(p) >= 4 {
				size := int(binary.BigEndian.Uint32(p))
				if len(p) < 4+size {
					break
				}
				var req remoting.Command
				if err := remoting.DecodeFrame(p[4:4+size], &req); err != nil {
					panic(err)
				}
				p = p[4+size:]
				var resp *remoting.Command
				switch req.Code {
				case remoting.SendMessageV2, remoting.SendMessage:
					off++
					resp = remoting.NewResponse(&req, remoting.Success, "")
					resp.SetFields("msgId", "7F00000100002A9F0000000000000000", "queueId", "0", "queueOffset", strconv.FormatInt(off, 10))
				case remoting.GetMaxOffset:
					resp = remoting.NewResponse(&req, remoting.Success, "")
					resp.SetFields("offset", "0")
				default:
					resp = remoting.NewResponse(&req, remoting.Success, "")
				}
				if c.out, err = remoting.AppendFrame(c.out, resp); err != nil {
					panic(err)
				}
			}
			c.in = append(c.in[:0], p...)
			for out := c.out; len(out) > 0; {
				w, err := unix.Write(int(ev.Fd), out)
				if err == unix.EAGAIN {
					// Rare with answers this small: wait for room.
					_, _ = unix.Poll([]unix.PollFd{{Fd: ev.Fd, Events: unix.POLLOUT}}, -1)
					continue
				}
				if err != nil {
					break
				}
				out = out[w:]
			}
			c.out = c.out[:0]
		}
	}
}
