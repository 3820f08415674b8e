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

// stableLow is the first port StableAddr picks from.
const stableLow = 10000

// StableAddr returns a loopback address, free now, for a server that a
// test stops and starts again on the same address: a member of a
// replicated set, whose peers and clients know it by its address. A port
// from 0 would do for the first start, but while the server is down the
// kernel may give the same port to any outgoing connection's local end
// (the restart then fails with "address already in use" for as long as
// that connection lives) or to another test's listener (whose clients'
// requests then reach the wrong server). So the port is picked below the
// kernel's ephemeral range (net.ipv4.ip_local_port_range), where neither
// binds to port 0 nor connections take ports, and is reserved for the
// life of the process: never handed out twice in it, nor by StableAddr in
// another test process while this one runs (a lock file per port). The
// port below it by two is reserved with it: the broker command listens
// there too (its VIP channel, --vip-listen auto), so it must never be
// another server's address.
func StableAddr(t testing.TB) string {
	t.Helper()
	lo := ephemeralLow()
	stable.Lock()
	defer stable.Unlock()
	if stable.given == nil {
		stable.given = map[int]bool{}
	}
	for range 1000 {
		port := stableLow + 2 + rand.IntN(lo-stableLow-2)
		if stable.given[port] || stable.given[port-2] {
			continue
		}
		if !reservePort(port) {
			continue // another test process holds it
		}
		stable.given[port] = true // reserved or not, never twice here
		if !reservePort(port - 2) {
			continue
		}
		stable.given[port-2] = true
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue // taken by another process
		}
		addr := ln.Addr().String()
		ln.Close()
		return addr
	}
	t.Fatalf("no free loopback port between %d and %d", stableLow, lo)
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
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &lo, &hi); err != nil || lo <= stableLow+1000 {
		return fallback
	}
	return lo
}
