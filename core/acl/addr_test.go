package acl_test

import (
	"net/netip"
	"testing"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/remoting"
)

// TestAddressPatterns checks each pattern form through the global
// white-list: an unsigned request passes exactly from matching addresses.
func TestAddressPatterns(t *testing.T) {
	for _, c := range []struct {
		pattern string
		match   []string
		miss    []string
	}{
		{"*", []string{"1.2.3.4", "::1", "fe80::1%eth0"}, nil},
		{"*.*.*.*", []string{"1.2.3.4", "::1"}, nil},
		{"192.168.1.10", []string{"192.168.1.10", "::ffff:192.168.1.10"}, []string{"192.168.1.11", "::1"}},
		{"::1", []string{"::1"}, []string{"127.0.0.1", "::2"}},
		{"192.168.1.*", []string{"192.168.1.0", "192.168.1.255", "::ffff:192.168.1.7"}, []string{"192.168.2.1", "::1"}},
		{"192.168.*.*", []string{"192.168.0.1", "192.168.255.255"}, []string{"192.169.0.1"}},
		{"192.168.1.1-100", []string{"192.168.1.1", "192.168.1.50", "192.168.1.100"}, []string{"192.168.1.0", "192.168.1.101", "192.168.2.50"}},
		{"10.1-2.*.*", []string{"10.1.0.0", "10.2.9.9"}, []string{"10.3.0.0"}},
		{"192.168.1.{1,5,9}", []string{"192.168.1.1", "192.168.1.9"}, []string{"192.168.1.2"}},
		{"10.0.0.0/8", []string{"10.0.0.1", "10.255.0.1", "::ffff:10.1.1.1"}, []string{"11.0.0.1"}},
		{"10.1.2.3/8", []string{"10.9.9.9"}, []string{"11.0.0.1"}},
		{"::ffff:10.0.0.0/104", []string{"10.0.0.1"}, []string{"11.0.0.1"}},
		{"fd00::/8", []string{"fd12::1"}, []string{"fe80::1", "10.0.0.1"}},
	} {
		ch, err := acl.New(acl.Config{Enabled: true, GlobalWhiteRemoteAddresses: []string{c.pattern}})
		if err != nil {
			t.Errorf("%q: %v", c.pattern, err)
			continue
		}
		req := remoting.NewRequest(remoting.DeleteTopicInBroker, map[string]string{"topic": "T"}, nil)
		for _, a := range c.match {
			if err := ch.Check(netip.MustParseAddr(a), req); err != nil {
				t.Errorf("%q does not match %s: %v", c.pattern, a, err)
			}
		}
		for _, a := range c.miss {
			if err := ch.Check(netip.MustParseAddr(a), req); err == nil {
				t.Errorf("%q matches %s", c.pattern, a)
			}
		}
	}
	for _, bad := range []string{"1.2.3", "1.2.3.4.5", "1.2.3.256", "1.2.3.a", "1.2.3.-1", "1.2.3.5-", "1.2.3.{}", "1.2.3.{1,300}", "2001:db8::*", "1.2.3.4/40", "x/8", " "} {
		if _, err := acl.New(acl.Config{GlobalWhiteRemoteAddresses: []string{bad}}); err == nil {
			t.Errorf("pattern %q accepted", bad)
		}
	}
}
