package bench

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ErrNoProc is returned by ProcessCPU and ListenerPID where /proc cannot
// answer: on a system other than Linux, or for a process of another user.
var ErrNoProc = errors.New("bench: /proc cannot tell")

// userHZ is the unit of the CPU times in /proc/<pid>/stat, the kernel's
// USER_HZ, which sysconf(_SC_CLK_TCK) reports. It is part of the kernel's
// ABI and 100 on every architecture Go runs Linux on, whatever the
// kernel's own tick rate.
const userHZ = 100

// ProcessCPU returns the CPU time, user plus system, that process pid has
// used since it started, over all its threads, from /proc/<pid>/stat. Its
// resolution is 10 ms, so a figure per message needs a run of seconds.
func ProcessCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("%w: CPU time of pid %d: %v", ErrNoProc, pid, err)
	}
	return parseProcStat(b)
}

// parseProcStat reads utime and stime, fields 14 and 15, from the text of
// /proc/<pid>/stat. The second field, the command name in parentheses, may
// hold spaces and parentheses itself, so fields are counted from after its
// last ')'.
func parseProcStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: /proc stat line without a command name: %.40q", b)
	}
	// After the name: field 3 (state) is rest[0], so field n is rest[n-3].
	rest := strings.Fields(string(b[i+1:]))
	if len(rest) < 13 {
		return 0, fmt.Errorf("bench: /proc stat line has %d fields after the name, want at least 13", len(rest))
	}
	var ticks int64
	for _, f := range rest[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("bench: /proc stat CPU time %q is not a tick count", f)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / userHZ), nil
}

// ListenerPID returns the id of the process on this machine that listens
// on addr, a TCP host:port. It finds the socket's inode in /proc/net/tcp
// or /proc/net/tcp6 and then the process holding that inode among
// /proc/*/fd, so it sees only processes whose descriptors this user may
// read. An unspecified host (0.0.0.0 or ::) matches any listener on the
// port.
func ListenerPID(addr string) (int, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return 0, fmt.Errorf("bench: listener address %q: %w", addr, err)
	}
	var inodes []string
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		inodes = append(inodes, listenInodes(b, ap)...)
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("%w: no listener on %s in /proc/net/tcp", ErrNoProc, addr)
	}
	want := make(map[string]bool, len(inodes))
	for _, ino := range inodes {
		want["socket:["+ino+"]"] = true
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if link, err := os.Readlink(fd); err == nil && want[link] {
			// fd is /proc/<pid>/fd/<n>.
			pid, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(fd))))
			if err == nil {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: the process listening on %s is not one this user can see", ErrNoProc, addr)
}

// tcpListen is the st value of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// listenInodes returns the inodes of the listening sockets in a
// /proc/net/tcp or tcp6 table whose local address is ap, or any address
// on ap's port when ap's host is unspecified. Each line reads
//
//	sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
//
// with local_address the address's 32-bit words in host byte order, in
// hex, then ':' and the port in hex.
func listenInodes(table []byte, ap netip.AddrPort) []string {
	var inodes []string
	lines := strings.Split(string(table), "\n")
	for _, line := range lines[min(1, len(lines)):] { // the first is the header
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != tcpListen {
			continue
		}
		host, port, ok := strings.Cut(f[1], ":")
		if !ok {
			continue
		}
		p, err := strconv.ParseUint(port, 16, 16)
		if err != nil || uint16(p) != ap.Port() {
			continue
		}
		if ap.Addr().IsUnspecified() || procNetAddr(host) == ap.Addr().Unmap() || procNetAddr(host).IsUnspecified() {
			inodes = append(inodes, f[9])
		}
	}
	return inodes
}

// procNetAddr decodes a local_address host of /proc/net/tcp (8 hex
// digits) or tcp6 (32): the address's 32-bit words, each printed as a
// number in host byte order. An IPv4-mapped IPv6 address comes back as
// IPv4.
func procNetAddr(h string) netip.Addr {
	if len(h) != 8 && len(h) != 32 {
		return netip.Addr{}
	}
	var b [16]byte
	for w := 0; w < len(h)/8; w++ {
		v, err := strconv.ParseUint(h[8*w:8*w+8], 16, 32)
		if err != nil {
			return netip.Addr{}
		}
		binary.NativeEndian.PutUint32(b[4*w:], uint32(v))
	}
	if len(h) == 8 {
		return netip.AddrFrom4([4]byte(b[:4]))
	}
	return netip.AddrFrom16(b).Unmap()
}
