package natsbridge

import (
	"errors"
	"strings"
)

// SubjectResend is the last two tokens of the resend service's subject,
// <prefix>.<cluster>.ctl.resend.
const SubjectResend = "ctl.resend"

// Subject returns the subject of an event: prefix.cluster.kind.group.topic
// with cluster, group and topic escaped by EscapeToken. prefix is used as
// given.
func Subject(prefix, cluster, kind, group, topic string) string {
	return prefix + "." + EscapeToken(cluster) + "." + kind + "." + EscapeToken(group) + "." + EscapeToken(topic)
}

// ResendSubject returns the resend service's subject for a prefix and
// cluster.
func ResendSubject(prefix, cluster string) string {
	return prefix + "." + EscapeToken(cluster) + "." + SubjectResend
}

// EscapeToken turns a name into one NATS subject token of the characters
// A-Z a-z 0-9 _ - only, reversibly (UnescapeToken undoes it):
//
//   - A-Z a-z 0-9 and - stand for themselves.
//   - Any other byte b is written _XX, XX being b in two upper-case hex
//     digits: '.' is _2E, '%' is _25, '*' is _2A, a space is _20.
//   - _ stands for itself, except that it is written _5F when the next two
//     bytes of the name are upper-case hex digits, where it would read as
//     an escape.
//
// So the common names (CID_ORDER, orders-v2, TopicTest) are unchanged.
// Names are never empty (the broker refuses empty topics and groups); an
// empty name gives an empty token.
func EscapeToken(s string) string {
	if plainToken(s) {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '_':
			if i+2 < len(s) && isUpperHex(s[i+1]) && isUpperHex(s[i+2]) {
				sb.WriteString("_5F")
			} else {
				sb.WriteByte('_')
			}
		case safeByte(c):
			sb.WriteByte(c)
		default:
			sb.WriteByte('_')
			sb.WriteByte(upperHex[c>>4])
			sb.WriteByte(upperHex[c&0xf])
		}
	}
	return sb.String()
}

// errBadToken is returned by UnescapeToken for bytes EscapeToken never
// writes.
var errBadToken = errors.New("natsbridge: not an escaped subject token")

// UnescapeToken returns the name EscapeToken turned into tok: _XX with two
// upper-case hex digits is the byte XX, any other _ is itself.
func UnescapeToken(tok string) (string, error) {
	if !strings.Contains(tok, "_") {
		if !tokenSafe(tok) {
			return "", errBadToken
		}
		return tok, nil
	}
	var sb strings.Builder
	sb.Grow(len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if !safeByte(c) {
			return "", errBadToken
		}
		if c == '_' && i+2 < len(tok) && isUpperHex(tok[i+1]) && isUpperHex(tok[i+2]) {
			sb.WriteByte(unhex(tok[i+1])<<4 | unhex(tok[i+2]))
			i += 2
			continue
		}
		sb.WriteByte(c)
	}
	return sb.String(), nil
}

const upperHex = "0123456789ABCDEF"

func isUpperHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' }

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'A' + 10
}

// safeByte reports whether c may appear in an escaped token.
func safeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
}

// tokenSafe reports whether every byte of s is A-Z a-z 0-9 _ -.
func tokenSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if !safeByte(s[i]) {
			return false
		}
	}
	return true
}

// plainToken reports whether s escapes to itself.
func plainToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !safeByte(c) {
			return false
		}
		if c == '_' && i+2 < len(s) && isUpperHex(s[i+1]) && isUpperHex(s[i+2]) {
			return false
		}
	}
	return true
}
