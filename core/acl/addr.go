package acl

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// addrPattern is one remote-address pattern of the configuration, in
// RocketMQ's forms:
//
//	*, *.*.*.*           any address
//	192.168.1.10, ::1    one address (IPv4-mapped IPv6 counts as IPv4)
//	192.168.1.*          per-octet patterns: each octet a number, *, a
//	192.168.*.*          range a-b or a set {a,b,c}
//	192.168.1.1-100
//	192.168.1.{1,5,9}
//	10.0.0.0/8, fd00::/8 CIDR, IPv4 or IPv6
//
// IPv6 ranges are written as CIDR.
type addrPattern struct {
	text   string
	any    bool
	prefix netip.Prefix // one address or CIDR, when valid
	octets [4]octetSet  // per-octet IPv4 pattern, when !any and !prefix.IsValid()
}

// octetSet is a set of octet values, one bit each.
type octetSet [4]uint64

func (s *octetSet) add(lo, hi int) {
	for v := lo; v <= hi; v++ {
		s[v>>6] |= 1 << (v & 63)
	}
}

func (s *octetSet) has(v byte) bool { return s[v>>6]&(1<<(v&63)) != 0 }

func parseAddrPattern(text string) (addrPattern, error) {
	p := addrPattern{text: text}
	s := strings.TrimSpace(text)
	switch {
	case s == "":
		return p, errors.New("empty address pattern")
	case s == "*" || s == "*.*.*.*":
		p.any = true
		return p, nil
	case strings.Contains(s, "/"):
		pre, err := netip.ParsePrefix(s)
		if err != nil {
			return p, fmt.Errorf("address pattern %q: bad CIDR", text)
		}
		if pre.Addr().Is4In6() {
			if pre.Bits() < 96 {
				return p, fmt.Errorf("address pattern %q: an IPv4-mapped prefix shorter than /96", text)
			}
			pre = netip.PrefixFrom(pre.Addr().Unmap(), pre.Bits()-96)
		}
		p.prefix = pre.Masked()
		return p, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap().WithZone("")
		p.prefix = netip.PrefixFrom(a, a.BitLen())
		return p, nil
	}
	if strings.Contains(s, ":") {
		return p, fmt.Errorf("address pattern %q: not an IPv6 address; write IPv6 ranges as CIDR", text)
	}
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return p, fmt.Errorf("address pattern %q: want four octets, *, a-b or {a,b}, or CIDR", text)
	}
	for i, part := range parts {
		if err := parseOctet(&p.octets[i], part); err != nil {
			return p, fmt.Errorf("address pattern %q: octet %d: %v", text, i+1, err)
		}
	}
	return p, nil
}

func parseOctet(set *octetSet, s string) error {
	switch {
	case s == "*":
		set.add(0, 255)
	case strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}"):
		for _, v := range strings.Split(s[1:len(s)-1], ",") {
			n, err := octet(v)
			if err != nil {
				return err
			}
			set.add(n, n)
		}
	case strings.Contains(s, "-"):
		lo, hi, _ := strings.Cut(s, "-")
		a, err := octet(lo)
		if err != nil {
			return err
		}
		b, err := octet(hi)
		if err != nil {
			return err
		}
		if a > b {
			return fmt.Errorf("range %q runs backwards", s)
		}
		set.add(a, b)
	default:
		n, err := octet(s)
		if err != nil {
			return err
		}
		set.add(n, n)
	}
	return nil
}

func octet(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > 255 || s == "" {
		return 0, fmt.Errorf("%q is not 0-255", s)
	}
	return n, nil
}

// match reports whether a, unmapped and without zone, fits the pattern.
func (p *addrPattern) match(a netip.Addr) bool {
	if p.any {
		return true
	}
	a = a.Unmap().WithZone("")
	if p.prefix.IsValid() {
		return p.prefix.Contains(a)
	}
	if !a.Is4() {
		return false
	}
	b := a.As4()
	for i := range b {
		if !p.octets[i].has(b[i]) {
			return false
		}
	}
	return true
}

// matchAny reports whether a fits one of ps.
func matchAny(ps []addrPattern, a netip.Addr) bool {
	for i := range ps {
		if ps[i].match(a) {
			return true
		}
	}
	return false
}
