package properties

import (
	"bytes"
	"slices"
	"strings"
)

// The separators of the format.
const (
	NameSep  = 0x01 // between a key and its value
	ValueSep = 0x02 // after every value
)

// MaxLen is the longest properties string the stored layout can hold: its
// length field is an int16.
const MaxLen = 32767

// Next splits the first piece off rest and returns the remainder as tail.
// ok is false for a piece that is not exactly one key and one value; the
// caller skips it. A loop over a string reads
//
//	for rest := p; len(rest) > 0; {
//		k, v, rest, ok = properties.Next(rest)
//		...
//	}
func Next(rest []byte) (k, v, tail []byte, ok bool) {
	piece := rest
	if i := bytes.IndexByte(rest, ValueSep); i >= 0 {
		piece, tail = rest[:i], rest[i+1:]
	}
	i := bytes.IndexByte(piece, NameSep)
	if i < 0 || bytes.IndexByte(piece[i+1:], NameSep) >= 0 {
		return nil, nil, tail, false
	}
	return piece[:i], piece[i+1:], tail, true
}

// Lookup returns the last value of key in p without allocating. The value
// aliases p.
func Lookup(p []byte, key string) (val []byte, found bool) {
	for rest := p; len(rest) > 0; {
		var k, v []byte
		var ok bool
		k, v, rest, ok = Next(rest)
		if ok && string(k) == key {
			val, found = v, true
		}
	}
	return val, found
}

// AppendPair appends key and value to dst as one pair.
func AppendPair[S ~string | ~[]byte](dst []byte, key, value S) []byte {
	dst = append(dst, key...)
	dst = append(dst, NameSep)
	dst = append(dst, value...)
	return append(dst, ValueSep)
}

// Encode encodes m with its keys sorted, so the same map always encodes to
// the same bytes. Pairs with an empty key or value are skipped (a client
// never sends them), and so are keys or values holding a separator byte,
// which could not be read back.
func Encode(m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	n := 0
	for k, v := range m {
		if k == "" || v == "" || strings.ContainsAny(k, "\x01\x02") || strings.ContainsAny(v, "\x01\x02") {
			continue
		}
		keys = append(keys, k)
		n += len(k) + len(v) + 2
	}
	slices.Sort(keys)
	out := make([]byte, 0, n)
	for _, k := range keys {
		out = AppendPair(out, k, m[k])
	}
	return out
}
