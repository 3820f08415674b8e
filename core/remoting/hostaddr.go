package remoting

import "net"

// HostIPv4 returns the first non-loopback IPv4 address of the host, else
// 127.0.0.1: what a broker advertises when it listens on every address,
// and what a client puts in its client id.
func HostIPv4() net.IP {
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() {
				if v4 := ipn.IP.To4(); v4 != nil {
					return v4
				}
			}
		}
	}
	return net.IPv4(127, 0, 0, 1)
}
