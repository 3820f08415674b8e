package broker

import (
	"net"
	"net/netip"
	"testing"
)

// TestAdvertisedAddress checks that a listener on every address advertises
// a host address remote clients can dial, not 127.0.0.1, whenever the host
// has one, and that a specific listen address is advertised as it is.
func TestAdvertisedAddress(t *testing.T) {
	if got := advertised(&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 10911}); got != "10.1.2.3:10911" {
		t.Errorf("specific address advertised as %s", got)
	}
	hasHostIP := false
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
				hasHostIP = true
			}
		}
	}
	for _, ip := range []net.IP{net.IPv4zero, net.IPv6unspecified, nil} {
		got := advertised(&net.TCPAddr{IP: ip, Port: 10911})
		ap, err := netip.ParseAddrPort(got)
		if err != nil || ap.Port() != 10911 || ap.Addr().IsUnspecified() {
			t.Fatalf("listen on %v advertised as %q", ip, got)
		}
		if hasHostIP && ap.Addr().IsLoopback() {
			t.Errorf("listen on %v advertised loopback %s although the host has another address", ip, got)
		}
	}
}
