// Package tag owns RocketMQ tag expressions, the subscription type "TAG"
// (and "", which clients send for the same thing): parsing one once, and
// matching messages against it by tag hash or by tag string.
//
// It imports only the standard library and core/message (which reads
// properties with the leaf codec internal/properties), so it also builds for
// GOOS=wasip1 and runs inside WebAssembly filter plugins.
//
// # Grammar
//
//	expression = blank | "*" | list .
//	list       = tag { "||" tag } .
//	tag        = blank | text .              (surrounding white space trimmed)
//	blank      = { white space } .
//	text       = any UTF-8 without '|', 0x01 or 0x02, not just "*" .
//
// Empty parts of a list are dropped ("A || || B" is "A || B"), and a tag
// listed twice counts once. Tags are case-sensitive and compared byte for
// byte.
//
// Rejected, with an error that wraps ErrInvalid and names the problem:
//
//	+--------------------+---------------------------------------------+
//	| input              | why                                         |
//	+--------------------+---------------------------------------------+
//	| "||", " || "       | names no tag, so it could match nothing     |
//	| "A | B", "A ||| B" | a '|' left inside a tag: a typo for "||"    |
//	| "A || *"           | "*" means "everything" only on its own      |
//	| "A\x01"            | 0x01 / 0x02 cannot occur in a stored TAGS   |
//	| invalid UTF-8      | cannot be a tag a client sent               |
//	+--------------------+---------------------------------------------+
//
// An expression longer than MaxExprLen bytes is rejected with ErrTooLong.
//
// # Matching
//
// Each consume-queue entry keeps the tag hash of its message
// (message.TagHash of the TAGS property; 0 for a message without one). On
// the pull path MatchTagHash decides from that hash alone and NeedsRecord is
// false, so no record is read to filter by tag. Distinct tags may share a
// hash, so the broker can over-deliver; the clients compare the tag string
// again and drop such messages, which is what RocketMQ brokers do as well.
// Match and MatchTag compare tag strings exactly for callers that want the
// precise answer.
//
// # Invariants
//
//  1. A compiled Filter is immutable; all its methods are safe for
//     concurrent use.
//  2. "*" (or a blank expression) matches every message, including those
//     without TAGS, by hash and by string.
//  3. Otherwise MatchTag(t) implies MatchTagHash(message.TagHash(t)): the
//     hash check never refuses a message the string check accepts.
//  4. Matching never allocates.
package tag
