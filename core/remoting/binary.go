package remoting

import (
	"encoding/binary"
	"fmt"
	"math"
)

// languageCodes maps the ROCKETMQ header's one-byte language code to its
// name; the index is the code.
var languageCodes = [...]string{
	0:  "JAVA",
	1:  "CPP",
	2:  "DOTNET",
	3:  "PYTHON",
	4:  "DELPHI",
	5:  "ERLANG",
	6:  "RUBY",
	7:  "OTHER",
	8:  "HTTP",
	9:  "GO",
	10: "PHP",
	11: "OMS",
	12: "RUST",
}

// languageOther is the code written for a language name without one.
const languageOther = 7

func languageCode(name string) byte {
	for i, n := range languageCodes {
		if n == name {
			return byte(i)
		}
	}
	return languageOther
}

func languageName(code byte) string {
	if int(code) < len(languageCodes) {
		return languageCodes[code]
	}
	return languageCodes[languageOther]
}

// binaryFixedLen is the size of the ROCKETMQ header's fixed fields: code,
// language, version, opaque, flag and the remark length.
const binaryFixedLen = 2 + 1 + 2 + 4 + 4 + 4

// appendBinaryHeader writes c's header in the ROCKETMQ layout (see doc.go).
func appendBinaryHeader(dst []byte, c *Command) ([]byte, error) {
	if len(c.Remark) > math.MaxInt32 {
		return dst, ErrFrameTooLarge
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Code))        // code
	dst = append(dst, languageCode(c.Language))                     // language
	dst = binary.BigEndian.AppendUint16(dst, uint16(c.Version))     // version
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Opaque))      // opaque
	dst = binary.BigEndian.AppendUint32(dst, uint32(c.Flag))        // flag
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(c.Remark))) // remark length
	dst = append(dst, c.Remark...)                                  // remark
	extAt := len(dst)
	dst = append(dst, 0, 0, 0, 0) // extFields length, filled in below
	var err error
	field := func(k, v string) {
		if len(k) > math.MaxInt16 {
			err = errKeyTooLong(len(k))
			return
		}
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(k))) // key length
		dst = append(dst, k...)                                  // key
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(v))) // value length
		dst = append(dst, v...)                                  // value
	}
	if c.ExtFields == nil {
		for i, n := 0, c.pairLen(); i+1 < n; i += 2 { // SetFields's pairs, or a lazily decoded request's
			field(c.pair(i), c.pair(i+1))
		}
	}
	for k, v := range c.ExtFields {
		field(k, v)
	}
	if err != nil {
		return dst, err
	}
	extLen := len(dst) - extAt - 4
	if extLen > math.MaxInt32 {
		return dst, ErrFrameTooLarge
	}
	binary.BigEndian.PutUint32(dst[extAt:], uint32(extLen))
	return dst, nil
}

func errKeyTooLong(n int) error {
	return fmt.Errorf("%w: extFields key of %d bytes does not fit the binary header", ErrFrameTooLarge, n)
}

// decodeBinaryHeader decodes a ROCKETMQ header into c, whose fields are
// zero. m, if not nil, is an empty map that may be reused for ExtFields. The
// header must be used up exactly.
func decodeBinaryHeader(h []byte, c *Command, m map[string]string) error {
	if len(h) < binaryFixedLen {
		return malformed("binary header of %d bytes is shorter than %d", len(h), binaryFixedLen)
	}
	c.Code = int16(binary.BigEndian.Uint16(h[0:]))
	c.Language = languageName(h[2])
	c.Version = int16(binary.BigEndian.Uint16(h[3:]))
	c.Opaque = int32(binary.BigEndian.Uint32(h[5:]))
	c.Flag = int32(binary.BigEndian.Uint32(h[9:]))
	remarkLen := int64(int32(binary.BigEndian.Uint32(h[13:])))
	p := binaryFixedLen
	if remarkLen < 0 || remarkLen > int64(len(h)-p) {
		return malformed("binary header: remark length %d, %d bytes left", remarkLen, len(h)-p)
	}
	// Every string of the header is a piece of this one copy.
	all := string(h)
	c.Remark = all[p : p+int(remarkLen)]
	p += int(remarkLen)
	if len(h)-p < 4 {
		return malformed("binary header: no extFields length")
	}
	extLen := int64(int32(binary.BigEndian.Uint32(h[p:])))
	p += 4
	if extLen != int64(len(h)-p) {
		return malformed("binary header: extFields length %d, %d bytes left", extLen, len(h)-p)
	}
	if extLen == 0 {
		return nil
	}
	if m == nil {
		m = make(map[string]string, 16)
	}
	for p < len(h) {
		if len(h)-p < 2 {
			return malformed("binary header: truncated extFields key length")
		}
		kl := int(int16(binary.BigEndian.Uint16(h[p:])))
		p += 2
		if kl < 0 || kl > len(h)-p {
			return malformed("binary header: extFields key length %d, %d bytes left", kl, len(h)-p)
		}
		k := all[p : p+kl]
		p += kl
		if len(h)-p < 4 {
			return malformed("binary header: truncated extFields value length")
		}
		vl := int64(int32(binary.BigEndian.Uint32(h[p:])))
		p += 4
		if vl < 0 || vl > int64(len(h)-p) {
			return malformed("binary header: extFields value length %d, %d bytes left", vl, len(h)-p)
		}
		m[k] = all[p : p+int(vl)]
		p += int(vl)
	}
	c.ExtFields = m
	return nil
}
