package sdk

import (
	"strings"
	"unicode/utf8"
)

// JSONValue is a value LookupJSON found in a JSON document. It is a view
// into the document, valid as long as the document is: for a Message's
// body, until the call returns.
type JSONValue struct {
	raw      []byte // a string's contents between the quotes, escapes as written; else the JSON text
	isString bool
}

// IsString reports whether the value is a JSON string.
func (v JSONValue) IsString() bool { return v.isString }

// Raw returns the value's JSON text; for a string, its contents between
// the quotes with escapes as written.
func (v JSONValue) Raw() []byte { return v.raw }

// Equal reports whether v is the string s (escapes decoded) or, for any
// other value, whether its JSON text is s ("3", "true", "null"). It
// allocates nothing.
func (v JSONValue) Equal(s string) bool {
	if v.isString {
		return stringEquals(v.raw, s)
	}
	return string(v.raw) == s
}

// String returns a string's decoded contents, or the JSON text of any other
// value. It allocates only for a string with escapes.
func (v JSONValue) String() string {
	if !v.isString || !strings.Contains(view(v.raw), `\`) {
		return view(v.raw)
	}
	var b strings.Builder
	for i := 0; i < len(v.raw); {
		r, next, ok := decodeChar(v.raw, i)
		if !ok {
			return view(v.raw)
		}
		b.WriteRune(r)
		i = next
	}
	return b.String()
}

// LookupJSON finds the value at path (field names, outermost first) in the
// JSON object doc. It reads in place: it builds no Go values and allocates
// nothing. ok is false when a field is missing, a step of the path is not
// an object, or the document is malformed up to the value; a field that
// appears twice yields its first value.
func LookupJSON(doc []byte, path ...string) (v JSONValue, ok bool) {
	raw, isString, ok := lookupJSON(doc, path)
	return JSONValue{raw: raw, isString: isString}, ok
}

// JSONField is LookupJSON over the message's body. ok is false when the
// body was not sent or is compressed (the broker inflates bodies only for
// a filter that asks, BodyInflater, and sends a body it cannot inflate as
// stored).
func (m *Message) JSONField(path ...string) (JSONValue, bool) {
	if !m.HasBody() || m.Compressed() {
		return JSONValue{}, false
	}
	return LookupJSON(m.Body(), path...)
}

// The scanner below finds one field's value without building any Go value,
// and gives up (ok false) on anything malformed.

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the closing quote of the string
// whose opening quote is at i, and whether it holds escapes.
func stringEnd(b []byte, i int) (end int, escaped, ok bool) {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i + 1, escaped, true
		case '\\':
			escaped = true
			i++
		}
	}
	return 0, false, false
}

// valueEnd returns the index just past the value starting at i.
func valueEnd(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		end, _, ok := stringEnd(b, i)
		return end, ok
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, _, ok := stringEnd(b, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	}
	start := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' &&
		b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i, i > start
}

// lookupJSON finds the value at path in the object doc. For a string it returns
// the raw contents between the quotes (escapes undecoded) and isString;
// otherwise the value's JSON text.
func lookupJSON(doc []byte, path []string) (raw []byte, isString, ok bool) {
	i := skipSpace(doc, 0)
	for depth, key := range path {
		if i >= len(doc) || doc[i] != '{' {
			return nil, false, false
		}
		found := false
		for i = skipSpace(doc, i+1); i < len(doc) && doc[i] != '}'; {
			if doc[i] != '"' {
				return nil, false, false
			}
			kEnd, kEsc, ok := stringEnd(doc, i)
			if !ok {
				return nil, false, false
			}
			k := doc[i+1 : kEnd-1]
			i = skipSpace(doc, kEnd)
			if i >= len(doc) || doc[i] != ':' {
				return nil, false, false
			}
			i = skipSpace(doc, i+1)
			var match bool
			if kEsc {
				match = stringEquals(k, key)
			} else {
				match = string(k) == key
			}
			if match {
				found = true
				break
			}
			end, ok := valueEnd(doc, i)
			if !ok {
				return nil, false, false
			}
			i = skipSpace(doc, end)
			if i < len(doc) && doc[i] == ',' {
				i = skipSpace(doc, i+1)
			}
		}
		if !found {
			return nil, false, false
		}
		if depth < len(path)-1 {
			continue
		}
		end, ok := valueEnd(doc, i)
		if !ok {
			return nil, false, false
		}
		if doc[i] == '"' {
			return doc[i+1 : end-1], true, true
		}
		return doc[i:end], false, true
	}
	return nil, false, false
}

// stringEquals reports whether the raw JSON string contents raw decode to
// want, without allocating.
func stringEquals(raw []byte, want string) bool {
	j := 0
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			if j >= len(want) || want[j] != c {
				return false
			}
			i++
			j++
			continue
		}
		if i+1 >= len(raw) {
			return false
		}
		var r rune
		switch raw[i+1] {
		case '"', '\\', '/':
			r = rune(raw[i+1])
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			var ok bool
			r, i, ok = unicodeEscape(raw, i)
			if !ok {
				return false
			}
			var enc [utf8.UTFMax]byte
			n := utf8.EncodeRune(enc[:], r)
			if j+n > len(want) || want[j:j+n] != string(enc[:n]) {
				return false
			}
			j += n
			continue
		default:
			return false
		}
		if j >= len(want) || want[j] != byte(r) {
			return false
		}
		i += 2
		j++
	}
	return j == len(want)
}

// unicodeEscape decodes the \uXXXX escape at raw[i] (and a following low
// surrogate) and returns the rune and the index after it.
func unicodeEscape(raw []byte, i int) (rune, int, bool) {
	hex4 := func(at int) (rune, bool) {
		if at+6 > len(raw) || raw[at] != '\\' || raw[at+1] != 'u' {
			return 0, false
		}
		var r rune
		for _, c := range raw[at+2 : at+6] {
			switch {
			case '0' <= c && c <= '9':
				r = r<<4 | rune(c-'0')
			case 'a' <= c && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case 'A' <= c && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return r, true
	}
	r, ok := hex4(i)
	if !ok {
		return 0, 0, false
	}
	if 0xD800 <= r && r < 0xDC00 {
		if lo, ok := hex4(i + 6); ok && 0xDC00 <= lo && lo < 0xE000 {
			return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), i + 12, true
		}
		return utf8.RuneError, i + 6, true
	}
	return r, i + 6, true
}

// decodeChar decodes the character of the raw JSON string contents at i and
// returns it with the index after it.
func decodeChar(raw []byte, i int) (rune, int, bool) {
	if raw[i] != '\\' {
		r, n := utf8.DecodeRune(raw[i:])
		return r, i + n, true
	}
	if i+1 >= len(raw) {
		return 0, 0, false
	}
	switch raw[i+1] {
	case '"', '\\', '/':
		return rune(raw[i+1]), i + 2, true
	case 'b':
		return '\b', i + 2, true
	case 'f':
		return '\f', i + 2, true
	case 'n':
		return '\n', i + 2, true
	case 'r':
		return '\r', i + 2, true
	case 't':
		return '\t', i + 2, true
	case 'u':
		return unicodeEscape(raw, i)
	}
	return 0, 0, false
}
