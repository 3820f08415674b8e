package sdk

import (
	"bytes"
	"slices"
	"strings"
)

// The properties string's separators: key 0x01 value 0x02, the 0x02 after
// every pair.
const (
	nameSep  = 0x01
	valueSep = 0x02
)

// nextProperty splits the first piece off rest and returns the remainder as
// tail. ok is false for a piece that is not exactly one key and one value,
// which readers skip, as the clients do. The broker reads the same format
// with its own codec; a test in the broker's module keeps the two in step.
func nextProperty(rest []byte) (k, v, tail []byte, ok bool) {
	piece := rest
	if i := bytes.IndexByte(rest, valueSep); i >= 0 {
		piece, tail = rest[:i], rest[i+1:]
	}
	i := bytes.IndexByte(piece, nameSep)
	if i < 0 || bytes.IndexByte(piece[i+1:], nameSep) >= 0 {
		return nil, nil, tail, false
	}
	return piece[:i], piece[i+1:], tail, true
}

// lookupProperty returns the last value of key in p without allocating.
func lookupProperty(p []byte, key string) (val []byte, found bool) {
	for rest := p; len(rest) > 0; {
		var k, v []byte
		var ok bool
		k, v, rest, ok = nextProperty(rest)
		if ok && string(k) == key {
			val, found = v, true
		}
	}
	return val, found
}

// encodePropertyMap encodes m with its keys sorted, skipping pairs that
// could not be read back (an empty key or value, a separator inside one),
// as the broker's encoder does.
func encodePropertyMap(m map[string]string) []byte {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if k == "" || v == "" || strings.ContainsAny(k, "\x01\x02") || strings.ContainsAny(v, "\x01\x02") {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []byte
	for _, k := range keys {
		out = append(out, k...)
		out = append(out, nameSep)
		out = append(out, m[k]...)
		out = append(out, valueSep)
	}
	return out
}
