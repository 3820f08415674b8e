package remoting

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"strconv"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON header is one flat object with seven known keys. Decoding it with
// encoding/json costs about 5 µs and 50 allocations for a SEND_MESSAGE
// header, which is most of a send's budget, so this file holds a scanner and
// a writer made for that one shape. The scanner accepts exactly the inputs
// encoding/json accepts when decoding into
//
//	struct {
//		Code      int16             `json:"code"`
//		Language  string            `json:"language"`
//		Version   int16             `json:"version"`
//		Opaque    int32             `json:"opaque"`
//		Flag      int32             `json:"flag"`
//		Remark    string            `json:"remark"`
//		ExtFields map[string]string `json:"extFields"`
//	}
//
// and yields the same values, with one deliberate difference: a number or a
// boolean as an extFields value is taken as its literal text instead of
// failing the whole header. The differential fuzz test holds it to this.

// maxJSONDepth is encoding/json's nesting limit; deeper input is rejected.
const maxJSONDepth = 10000

// Top-level keys of the JSON header.
const (
	keyUnknown = iota
	keyCode
	keyLanguage
	keyVersion
	keyOpaque
	keyFlag
	keyRemark
	keyExtFields
)

var headerKeys = [...]string{
	keyCode:      "code",
	keyLanguage:  "language",
	keyVersion:   "version",
	keyOpaque:    "opaque",
	keyFlag:      "flag",
	keyRemark:    "remark",
	keyExtFields: "extFields",
}

// span locates one decoded string inside jsonDecoder.out.
type span struct{ start, end int32 }

// jsonDecoder scans one header. Every decoded string is unescaped into out,
// and all of them become one Go string at the end, so a header costs one
// string allocation however many fields it has.
type jsonDecoder struct {
	in    []byte
	pos   int
	out   []byte
	pairs []span // extFields keys and values, alternating, in input order
}

var scratchPool = sync.Pool{New: func() any { return new(jsonDecoder) }}

// decodeJSONHeader decodes header into c, whose fields are zero. m, if not
// nil, is an empty map that may be reused for ExtFields.
func decodeJSONHeader(header []byte, c *Command, m map[string]string, lazy func(*Command) bool) error {
	d := scratchPool.Get().(*jsonDecoder)
	// out starts as a copy of the header, so that the strings that need no
	// rewriting (nearly all) are found where they are.
	d.in, d.pos, d.out, d.pairs = header, 0, append(d.out[:0], header...), d.pairs[:0]
	err := d.decode(c, m, lazy)
	d.in = nil
	if cap(d.out) <= 64<<10 && cap(d.pairs) <= 4096 {
		scratchPool.Put(d)
	}
	return err
}

func (d *jsonDecoder) decode(c *Command, m map[string]string, lazy func(*Command) bool) error {
	var (
		language, remark = span{-1, -1}, span{-1, -1}
		extSeen          bool // an extFields object was read after the last null
	)
	d.skipSpace()
	if d.literal("null") {
		// encoding/json treats a null document as "nothing to set".
		d.skipSpace()
		if d.pos != len(d.in) {
			return d.syntax("data after the header")
		}
		return nil
	}
	if !d.consume('{') {
		return d.syntax("header is not an object")
	}
	d.skipSpace()
	if !d.consume('}') {
		for {
			if d.pos >= len(d.in) || d.in[d.pos] != '"' {
				return d.syntax("expected a key")
			}
			mark := len(d.out)
			k, err := d.str()
			if err != nil {
				return err
			}
			key := matchHeaderKey(d.out[k.start:k.end])
			d.out = d.out[:mark]
			d.skipSpace()
			if !d.consume(':') {
				return d.syntax("expected ':'")
			}
			d.skipSpace()
			var (
				n   int64
				set bool
			)
			switch key {
			case keyCode:
				if n, set, err = d.intField(16); set {
					c.Code = int16(n)
				}
			case keyVersion:
				if n, set, err = d.intField(16); set {
					c.Version = int16(n)
				}
			case keyOpaque:
				if n, set, err = d.intField(32); set {
					c.Opaque = int32(n)
				}
			case keyFlag:
				if n, set, err = d.intField(32); set {
					c.Flag = int32(n)
				}
			case keyLanguage:
				err = d.strField(&language)
			case keyRemark:
				err = d.strField(&remark)
			case keyExtFields:
				if d.literal("null") {
					// null empties the map; a later object starts a new one.
					d.pairs, extSeen = d.pairs[:0], false
					break
				}
				extSeen = true
				err = d.extObject()
			default:
				err = d.skipValue(2)
			}
			if err != nil {
				return err
			}
			d.skipSpace()
			if d.consume(',') {
				d.skipSpace()
				continue
			}
			if d.consume('}') {
				break
			}
			return d.syntax("expected ',' or '}'")
		}
	}
	d.skipSpace()
	if d.pos != len(d.in) {
		return d.syntax("data after the header")
	}

	keep := extSeen && lazy != nil && lazy(c)
	if keep {
		// The pairs' places follow the text, in the same allocation.
		c.lazyAt = len(d.out)
		for _, sp := range d.pairs {
			d.out = binary.LittleEndian.AppendUint32(d.out, uint32(sp.start))
			d.out = binary.LittleEndian.AppendUint32(d.out, uint32(sp.end))
		}
	}
	all := string(d.out)
	if language.start >= 0 {
		c.Language = internLanguage(d.out[language.start:language.end], all, language)
	}
	if remark.start >= 0 {
		c.Remark = all[remark.start:remark.end]
	}
	if keep {
		c.lazyExt = all
		return nil
	}
	if extSeen {
		if m == nil {
			m = make(map[string]string, len(d.pairs)/2)
		}
		for i := 0; i+1 < len(d.pairs); i += 2 {
			k, v := d.pairs[i], d.pairs[i+1]
			m[all[k.start:k.end]] = all[v.start:v.end]
		}
		c.ExtFields = m
	}
	return nil
}

// internLanguage returns the common language names without pointing into
// the decoded header string.
func internLanguage(b []byte, all string, s span) string {
	switch string(b) {
	case LanguageGo:
		return LanguageGo
	case LanguageJava:
		return LanguageJava
	}
	return all[s.start:s.end]
}

// matchHeaderKey maps a decoded key to its field the way encoding/json
// does: an exact match, else a Unicode case-insensitive one.
func matchHeaderKey(k []byte) int {
	for i := keyCode; i < len(headerKeys); i++ {
		if string(k) == headerKeys[i] {
			return i
		}
	}
	for i := keyCode; i < len(headerKeys); i++ {
		if bytes.EqualFold(k, []byte(headerKeys[i])) {
			return i
		}
	}
	return keyUnknown
}

func (d *jsonDecoder) syntax(what string) error {
	return malformed("JSON header at byte %d: %s", d.pos, what)
}

func (d *jsonDecoder) skipSpace() {
	if d.pos < len(d.in) && d.in[d.pos] > ' ' {
		return
	}
	for d.pos < len(d.in) {
		switch d.in[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jsonDecoder) consume(b byte) bool {
	if d.pos < len(d.in) && d.in[d.pos] == b {
		d.pos++
		return true
	}
	return false
}

func (d *jsonDecoder) literal(lit string) bool {
	if len(d.in)-d.pos >= len(lit) && string(d.in[d.pos:d.pos+len(lit)]) == lit {
		d.pos += len(lit)
		return true
	}
	return false
}

// intField reads an integer of the given bit size, or null, which reports
// set = false so the field is left alone. Like encoding/json it rejects
// fractions, exponents and out-of-range values.
func (d *jsonDecoder) intField(bits int) (n int64, set bool, err error) {
	if d.literal("null") {
		return 0, false, nil
	}
	start := d.pos
	if err := d.number(); err != nil {
		return 0, false, err
	}
	lit := d.in[start:d.pos]
	n, ok := parseJSONInt(lit, bits)
	if !ok {
		return 0, false, malformed("JSON header: %q is not an int%d", lit, bits)
	}
	return n, true, nil
}

// parseJSONInt parses a whole decimal integer within bits: an optional
// '-', then one to 18 digits. Anything else reports false.
func parseJSONInt[T string | []byte](lit T, bits int) (int64, bool) {
	neg := len(lit) > 0 && lit[0] == '-'
	if neg {
		lit = lit[1:]
	}
	if len(lit) == 0 || len(lit) > 18 {
		return 0, false // 18 digits cannot overflow the sum below
	}
	limit := uint64(1) << (bits - 1) // magnitude of the minimum value
	var u uint64
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if u > limit {
		return 0, false
	}
	if neg {
		return -int64(u), true
	}
	if u == limit {
		return 0, false
	}
	return int64(u), true
}

// strField reads a string or null; null leaves the field alone.
func (d *jsonDecoder) strField(dst *span) error {
	if d.literal("null") {
		return nil
	}
	if d.pos >= len(d.in) || d.in[d.pos] != '"' {
		return d.syntax("expected a string")
	}
	s, err := d.str()
	if err != nil {
		return err
	}
	*dst = s
	return nil
}

// extObject reads the extFields object. Values are strings; numbers and
// booleans are taken as their literal text, and null as "".
func (d *jsonDecoder) extObject() error {
	if !d.consume('{') {
		return d.syntax("extFields is not an object")
	}
	d.skipSpace()
	if d.consume('}') {
		return nil
	}
	for {
		if d.pos >= len(d.in) || d.in[d.pos] != '"' {
			return d.syntax("expected an extFields key")
		}
		k, err := d.str()
		if err != nil {
			return err
		}
		d.skipSpace()
		if !d.consume(':') {
			return d.syntax("expected ':'")
		}
		d.skipSpace()
		var v span
		if d.pos >= len(d.in) {
			return d.syntax("expected an extFields value")
		}
		start := d.pos
		switch c := d.in[d.pos]; {
		case c == '"':
			if v, err = d.str(); err != nil {
				return err
			}
		case c == '-' || ('0' <= c && c <= '9'):
			if err := d.number(); err != nil {
				return err
			}
			v = span{int32(start), int32(d.pos)} // out holds the input first
		case d.literal("true"), d.literal("false"):
			v = span{int32(start), int32(d.pos)}
		case d.literal("null"):
			v = span{int32(len(d.out)), int32(len(d.out))}
		default:
			return d.syntax("extFields value is not a string, number or boolean")
		}
		d.pairs = append(d.pairs, k, v)
		d.skipSpace()
		if d.consume(',') {
			d.skipSpace()
			continue
		}
		if d.consume('}') {
			return nil
		}
		return d.syntax("expected ',' or '}' in extFields")
	}
}

// number checks one JSON number at pos and moves past it.
func (d *jsonDecoder) number() error {
	in, p := d.in, d.pos
	if p < len(in) && in[p] == '-' {
		p++
	}
	switch {
	case p < len(in) && in[p] == '0':
		p++
	case p < len(in) && '1' <= in[p] && in[p] <= '9':
		for p < len(in) && '0' <= in[p] && in[p] <= '9' {
			p++
		}
	default:
		d.pos = p
		return d.syntax("bad number")
	}
	if p < len(in) && in[p] == '.' {
		p++
		if p >= len(in) || in[p] < '0' || in[p] > '9' {
			d.pos = p
			return d.syntax("bad number")
		}
		for p < len(in) && '0' <= in[p] && in[p] <= '9' {
			p++
		}
	}
	if p < len(in) && (in[p] == 'e' || in[p] == 'E') {
		p++
		if p < len(in) && (in[p] == '+' || in[p] == '-') {
			p++
		}
		if p >= len(in) || in[p] < '0' || in[p] > '9' {
			d.pos = p
			return d.syntax("bad number")
		}
		for p < len(in) && '0' <= in[p] && in[p] <= '9' {
			p++
		}
	}
	d.pos = p
	return nil
}

// str reads the string at pos (which is '"') and returns where its value
// is in out. A string that needs no rewriting (no escapes, valid UTF-8) is
// left where it is: out starts with a copy of the input, so its span is its
// place in the input. Any other string is unescaped onto the end of out.
// Invalid UTF-8 and lone surrogates become U+FFFD, as in encoding/json.
func (d *jsonDecoder) str() (span, error) {
	in := d.in
	start := d.pos + 1
	p := start
	for {
		p = scanPlain(in, p)
		if p >= len(in) {
			d.pos = p
			return span{}, d.syntax("unterminated string")
		}
		c := in[p]
		if c == '"' {
			d.pos = p + 1
			return span{int32(start), int32(p)}, nil
		}
		if c < utf8.RuneSelf {
			break // an escape or a control character
		}
		r, size := utf8.DecodeRune(in[p:])
		if r == utf8.RuneError && size == 1 {
			break // invalid UTF-8, rewritten as U+FFFD
		}
		p += size
	}
	return d.strSlow(start, p)
}

// strSlow unescapes the string that starts at start, from p on, where the
// first byte needing work is, onto the end of out.
func (d *jsonDecoder) strSlow(start, p int) (span, error) {
	in := d.in
	outStart := len(d.out)
	d.out = append(d.out, in[start:p]...)
	for {
		// Copy the run of bytes that need no work.
		run := p
		p = scanPlain(in, p)
		d.out = append(d.out, in[run:p]...)
		if p >= len(in) {
			d.pos = p
			return span{}, d.syntax("unterminated string")
		}
		switch c := in[p]; {
		case c == '"':
			d.pos = p + 1
			return span{int32(outStart), int32(len(d.out))}, nil
		case c < 0x20:
			d.pos = p
			return span{}, d.syntax("control character in string")
		case c == '\\':
			if p+1 >= len(in) {
				d.pos = p
				return span{}, d.syntax("unterminated escape")
			}
			switch e := in[p+1]; e {
			case '"', '\\', '/':
				d.out = append(d.out, e)
			case 'b':
				d.out = append(d.out, '\b')
			case 'f':
				d.out = append(d.out, '\f')
			case 'n':
				d.out = append(d.out, '\n')
			case 'r':
				d.out = append(d.out, '\r')
			case 't':
				d.out = append(d.out, '\t')
			case 'u':
				r := hex4(in[p+2:])
				if r < 0 {
					d.pos = p
					return span{}, d.syntax("bad \\u escape")
				}
				p += 6
				if utf16.IsSurrogate(r) {
					// A pair only if a second \u escape follows and completes
					// it; otherwise the first one alone becomes U+FFFD.
					if p+1 < len(in) && in[p] == '\\' && in[p+1] == 'u' {
						if r2 := hex4(in[p+2:]); r2 >= 0 {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								d.out = utf8.AppendRune(d.out, dec)
								p += 6
								continue
							}
						}
					}
					r = utf8.RuneError
				}
				d.out = utf8.AppendRune(d.out, r)
				continue
			default:
				d.pos = p
				return span{}, d.syntax("bad escape")
			}
			p += 2
		default:
			r, size := utf8.DecodeRune(in[p:])
			if r == utf8.RuneError && size == 1 {
				d.out = append(d.out, "\uFFFD"...)
			} else {
				d.out = append(d.out, in[p:p+size]...)
			}
			p += size
		}
	}
}

// SWAR constants: one in each byte, and each byte's high bit.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// scanPlain returns the first index from p on whose byte is not plain
// (see plainByte), or len(in). It tests eight bytes at a time: in each
// term below the lowest flagged byte is a true match (a borrow can only
// flag bytes above one), so the lowest flag of their union is the first
// byte that is '"', '\\', a control character or not ASCII.
func scanPlain(in []byte, p int) int {
	for ; p+8 <= len(in); p += 8 {
		w := binary.LittleEndian.Uint64(in[p:])
		q := w ^ (swarOnes * '"')
		b := w ^ (swarOnes * '\\')
		m := ((q - swarOnes) & ^q) | ((b - swarOnes) & ^b) | ((w - swarOnes*0x20) & ^w) | w
		if m &= swarHigh; m != 0 {
			return p + bits.TrailingZeros64(m)>>3
		}
	}
	for p < len(in) && plainByte[in[p]] {
		p++
	}
	return p
}

// hex4 parses four hex digits, or returns -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// skipValue checks and skips any JSON value, for keys the header does not
// know. depth is the nesting level the value would open.
func (d *jsonDecoder) skipValue(depth int) error {
	if d.pos >= len(d.in) {
		return d.syntax("expected a value")
	}
	switch c := d.in[d.pos]; {
	case c == '"':
		mark := len(d.out)
		_, err := d.str()
		d.out = d.out[:mark]
		return err
	case c == '-' || ('0' <= c && c <= '9'):
		return d.number()
	case d.literal("true"), d.literal("false"), d.literal("null"):
		return nil
	case c == '{' || c == '[':
		if depth > maxJSONDepth {
			return d.syntax("nested too deeply")
		}
		d.pos++
		d.skipSpace()
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		if d.consume(closer) {
			return nil
		}
		for {
			if c == '{' {
				if d.pos >= len(d.in) || d.in[d.pos] != '"' {
					return d.syntax("expected a key")
				}
				if err := d.skipValue(depth + 1); err != nil {
					return err
				}
				d.skipSpace()
				if !d.consume(':') {
					return d.syntax("expected ':'")
				}
				d.skipSpace()
			}
			if err := d.skipValue(depth + 1); err != nil {
				return err
			}
			d.skipSpace()
			if d.consume(',') {
				d.skipSpace()
				continue
			}
			if d.consume(closer) {
				return nil
			}
			return d.syntax("expected ',' or a closing bracket")
		}
	default:
		return d.syntax("expected a value")
	}
}

// appendJSONHeader writes c's header as the JSON object clients send: all
// seven keys in their usual order, every extFields value a string. Keys of
// ExtFields come in map order.
func appendJSONHeader(dst []byte, c *Command) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(c.Code), 10)
	dst = append(dst, `,"language":`...)
	dst = appendJSONString(dst, c.Language)
	dst = append(dst, `,"version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	dst = append(dst, `,"opaque":`...)
	dst = strconv.AppendInt(dst, int64(c.Opaque), 10)
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(c.Flag), 10)
	dst = append(dst, `,"remark":`...)
	dst = appendJSONString(dst, c.Remark)
	dst = append(dst, `,"extFields":{`...)
	first := true
	field := func(k, v string) {
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendJSONString(dst, v)
	}
	if c.ExtFields == nil {
		for i, n := 0, c.pairLen(); i+1 < n; i += 2 { // SetFields's pairs, or a lazily decoded request's
			field(c.pair(i), c.pair(i+1))
		}
	}
	for k, v := range c.ExtFields {
		field(k, v)
	}
	return append(dst, "}}"...)
}

const hexDigits = "0123456789abcdef"

// plainByte marks the bytes that stand for themselves inside a JSON string:
// printable ASCII other than '"' and '\\'.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendJSONString writes s as a JSON string. Invalid UTF-8 bytes become
// \ufffd, as encoding/json writes them.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	run := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plainByte[c] {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			dst = append(dst, s[run:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			run = i
			continue
		}
		dst = append(dst, s[run:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		run = i
	}
	dst = append(dst, s[run:]...)
	return append(dst, '"')
}
