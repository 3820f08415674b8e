package brokertest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// StableAddr returns a loopback address, free now, for a server that a
// test stops and starts again on the same address: a member of a
// replicated set, whose peers know it by its raft address. A port from 0
// would do for the first start, but while the server is down the kernel
// may give the same port to any outgoing connection's local end, and the
// restart then fails with "address already in use" for as long as that
// connection lives. So the port is picked below the kernel's ephemeral
// range (net.ipv4.ip_local_port_range), where neither binds to port 0
// nor connections take ports, and never twice in one process.
func StableAddr(t testing.TB) string {
	t.Helper()
	lo := ephemeralLow()
	const first = 10000
	stable.Lock()
	defer stable.Unlock()
	if stable.given == nil {
		stable.given = map[int]bool{}
	}
	for range 1000 {
		port := first + rand.IntN(lo-first)
		if stable.given[port] {
			continue
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // taken by another process
		}
		addr := ln.Addr().String()
		ln.Close()
		stable.given[port] = true
		return addr
	}
	t.Fatalf("no free loopback port between %d and %d", first, lo)
	return ""
}

var stable struct {
	sync.Mutex
	given map[int]bool
}

// ephemeralLow returns the first port of the kernel's ephemeral range,
// 32768 when it cannot be read (Linux's default; other systems start
// higher).
func ephemeralLow() int {
	const fallback = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallback
	}
	var lo, hi int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &lo, &hi); err != nil || lo <= 10000+1000 {
		return fallback
	}
	return lo
}
