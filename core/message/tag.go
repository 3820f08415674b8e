package message

import (
	"unicode/utf16"
	"unicode/utf8"
)

// TagHash is the hash of a tag kept in each consume-queue entry: Java's
// String.hashCode over the tag's UTF-16 code units, widened to int64, so it
// agrees with the codes Java clients send. An empty tag hashes to 0.
func TagHash(tag string) int64 {
	var h int32
	for _, r := range tag {
		if r < 0x10000 {
			h = 31*h + int32(r)
			continue
		}
		r1, r2 := utf16.EncodeRune(r)
		h = 31*h + int32(r1)
		h = 31*h + int32(r2)
	}
	return int64(h)
}

// TagHashBytes is TagHash for a tag held in a byte slice, without
// allocating.
func TagHashBytes(tag []byte) int64 {
	var h int32
	for i := 0; i < len(tag); {
		c := tag[i]
		if c < 0x80 {
			h = 31*h + int32(c)
			i++
			continue
		}
		// Non-ASCII: decode the rune the slow way.
		r, n := utf8.DecodeRune(tag[i:])
		i += n
		if r < 0x10000 {
			h = 31*h + int32(r)
			continue
		}
		r1, r2 := utf16.EncodeRune(r)
		h = 31*h + int32(r1)
		h = 31*h + int32(r2)
	}
	return int64(h)
}
