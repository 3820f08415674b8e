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

// Subjects returns the subject to subscribe to for the events of a kind,
// group and topic on this bridge, each escaped as the bridge does (an
// empty kind, group or topic matches any; with neither group nor topic the
// subject ends in ">"), and the subject of its resend service.
func (b *Bridge) Subjects(kind, group, topic string) (events, resend string) {
	resend = ResendSubject(b.opts.SubjectPrefix, b.opts.Cluster)
	tok := func(s string) string {
		if s == "" {
			return "*"
		}
		return EscapeToken(s)
	}
	base := b.opts.SubjectPrefix + "." + EscapeToken(b.opts.Cluster) + "."
	if kind == "" {
		kind = "*"
	}
	if group == "" && topic == "" {
		return base + kind + ".>", resend
	}
	return base + kind + "." + tok(group) + "." + tok(topic), resend
}

// ResendSubject returns the resend service's subject for a prefix and
// cluster.
func ResendSubject(prefix, cluster string) string {
	return prefix + "." + EscapeToken(cluster) + "." + SubjectResend
}

// EscapeToken turns a name into one NATS subject token, reversibly
// (UnescapeToken undoes it):
//
//   - Every byte a RocketMQ topic or group name may hold stands for
//     itself: A-Z a-z 0-9 % | _ -. Names the broker accepts therefore pass
//     unchanged, always: GID_2024, %RETRY%orders, CID_A1|x.
//   - Any other byte b is written ~XX, XX being b in two upper-case hex
//     digits: '.' is ~2E, '*' is ~2A, '>' is ~3E, a space ~20 and '~'
//     itself ~7E. Only cluster names (from the configuration) and names
//     from other sources can hold such bytes.
//
// Names are never empty (the broker refuses empty topics and groups); an
// empty name gives an empty token.
func EscapeToken(s string) string {
	if tokenSafe(s) {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if safeByte(c) {
			sb.WriteByte(c)
			continue
		}
		sb.WriteByte(escapeByte)
		sb.WriteByte(upperHex[c>>4])
		sb.WriteByte(upperHex[c&0xf])
	}
	return sb.String()
}

// escapeByte starts an escape in a token: it is legal in NATS subjects and
// never part of a RocketMQ name.
const escapeByte = '~'

// errBadToken is returned by UnescapeToken for tokens EscapeToken never
// writes.
var errBadToken = errors.New("natsbridge: not an escaped subject token")

// UnescapeToken returns the name EscapeToken turned into tok.
func UnescapeToken(tok string) (string, error) {
	if tokenSafe(tok) {
		return tok, nil
	}
	var sb strings.Builder
	sb.Grow(len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case safeByte(c):
			sb.WriteByte(c)
		case c == escapeByte && i+2 < len(tok) && isUpperHex(tok[i+1]) && isUpperHex(tok[i+2]):
			b := unhex(tok[i+1])<<4 | unhex(tok[i+2])
			if safeByte(b) {
				return "", errBadToken // EscapeToken writes safe bytes as themselves
			}
			sb.WriteByte(b)
			i += 2
		default:
			return "", errBadToken
		}
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

// safeByte reports whether c stands for itself in a token: the bytes of
// RocketMQ's name rule (remoting.ValidateTopicName).
func safeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '-' || c == '%' || c == '|'
}

// tokenSafe reports whether every byte of s stands for itself.
func tokenSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if !safeByte(s[i]) {
			return false
		}
	}
	return true
}
