package message

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"
)

// OffsetMsgID returns the offsetMsgId of the record stored at commit-log
// offset off on host: uppercase hex of the address bytes, the port as an
// int32 and off as an int64.
func OffsetMsgID(host netip.AddrPort, off int64) string {
	var out [56]byte
	return string(AppendOffsetMsgID(out[:0], host, off))
}

// AppendOffsetMsgID appends OffsetMsgID(host, off) to dst.
func AppendOffsetMsgID(dst []byte, host netip.AddrPort, off int64) []byte {
	var b [28]byte
	n := 0
	if isV6(host) {
		a := host.Addr().As16()
		n += copy(b[:], a[:])
	} else {
		var a [4]byte
		if host.Addr().IsValid() {
			a = host.Addr().Unmap().As4()
		}
		n += copy(b[:], a[:])
	}
	binary.BigEndian.PutUint32(b[n:], uint32(host.Port()))
	binary.BigEndian.PutUint64(b[n+4:], uint64(off))
	const digits = "0123456789ABCDEF"
	for _, c := range b[:n+12] {
		dst = append(dst, digits[c>>4], digits[c&0xF])
	}
	return dst
}

// ParseOffsetMsgID reverses OffsetMsgID. It accepts 32 (IPv4) or 56 (IPv6)
// hex characters in either case.
func ParseOffsetMsgID(id string) (host netip.AddrPort, off int64, err error) {
	if len(id) != 32 && len(id) != 56 {
		return host, 0, malformed("offsetMsgId %q: want 32 or 56 hex characters", id)
	}
	b, err := hex.DecodeString(id)
	if err != nil {
		return host, 0, malformed("offsetMsgId %q: %v", id, err)
	}
	var addr netip.Addr
	if len(b) == 16 {
		addr = netip.AddrFrom4([4]byte(b[:4]))
	} else {
		addr = netip.AddrFrom16([16]byte(b[:16]))
	}
	n := len(b) - 12
	port := binary.BigEndian.Uint32(b[n:])
	if port > 0xFFFF {
		return host, 0, malformed("offsetMsgId %q: port %d", id, port)
	}
	return netip.AddrPortFrom(addr, uint16(port)), int64(binary.BigEndian.Uint64(b[n+4:])), nil
}

// uniqPrefix is the fixed first 20 hex characters of ids minted here:
// four random bytes standing in for an address, the pid and a zero class
// loader id, as the clients lay them out.
var (
	uniqPrefix  string
	uniqCounter atomic.Uint32
)

func init() {
	var b [10]byte
	_, _ = rand.Read(b[:4])
	binary.BigEndian.PutUint16(b[4:], uint16(os.Getpid()))
	uniqPrefix = strings.ToUpper(hex.EncodeToString(b[:]))
}

// NewUniqID mints a client-style message id (UNIQ_KEY): 32 uppercase hex
// characters, unique within this process and very likely across processes.
// It allocates only the string.
func NewUniqID() string {
	now := time.Now()
	ms := now.UnixMilli()
	m := uniqMonth.Load()
	if m == nil || ms < m.start || ms >= m.end {
		m = newUniqMonth(now)
		uniqMonth.Store(m)
	}
	var b [6]byte
	binary.BigEndian.PutUint32(b[:], uint32(ms-m.start))
	binary.BigEndian.PutUint16(b[4:], uint16(uniqCounter.Add(1)))
	var out [32]byte
	n := copy(out[:], uniqPrefix)
	for _, c := range b {
		out[n], out[n+1] = upperHex[c>>4], upperHex[c&0xF]
		n += 2
	}
	return string(out[:])
}

const upperHex = "0123456789ABCDEF"

// uniqMonth caches the local calendar month NewUniqID counts its
// milliseconds from, as Unix ms: finding a month's start through the time
// zone costs more than the rest of an id.
var uniqMonth atomic.Pointer[struct{ start, end int64 }]

func newUniqMonth(now time.Time) *struct{ start, end int64 } {
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, now.Location())
	return &struct{ start, end int64 }{start.UnixMilli(), start.AddDate(0, 1, 0).UnixMilli()}
}
