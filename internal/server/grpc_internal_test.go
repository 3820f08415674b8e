package server

import (
	"net"
	"testing"
)

// TestGRPCAdvertise: a gRPC listener on every address advertises the
// broker's advertised host, or without one the host's first non-loopback
// address, never the unspecified one.
func TestGRPCAdvertise(t *testing.T) {
	all := &net.TCPAddr{IP: net.IPv6unspecified, Port: 8081}
	if got := grpcAdvertise(all, "10.1.2.3:10911"); got != "10.1.2.3:8081" {
		t.Fatalf("with an advertised broker: %s", got)
	}
	got := grpcAdvertise(all, "")
	host, port, err := net.SplitHostPort(got)
	if err != nil || port != "8081" || net.ParseIP(host) == nil || net.ParseIP(host).IsUnspecified() {
		t.Fatalf("without one: %s", got)
	}
	if got := grpcAdvertise(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}, ""); got != "127.0.0.1:9" {
		t.Fatalf("a listener on one address: %s", got)
	}
}
