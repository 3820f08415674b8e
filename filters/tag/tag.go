package tag

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/rmq-go/rmq/core/message"
)

// MaxExprLen is the longest tag expression Compile accepts, in bytes.
const MaxExprLen = 16 << 10

// All is the expression that matches every message.
const All = "*"

// separator splits the tags of an expression.
const separator = "||"

// Errors of this package. Every error Compile returns wraps one of them.
var (
	// ErrTooLong is returned for an expression longer than MaxExprLen.
	ErrTooLong = errors.New("tag: expression too long")
	// ErrInvalid is returned for an expression that does not name a usable
	// set of tags.
	ErrInvalid = errors.New("tag: invalid expression")
)

// smallSet is the size up to which sets are scanned linearly; larger sets
// use binary search (hashes) and a map (strings).
const smallSet = 8

// Filter is a compiled tag expression. It is immutable and safe for
// concurrent use.
type Filter struct {
	all    bool
	tags   []string            // distinct tags in first-seen order
	hashes []int64             // sorted, distinct message.TagHash of tags
	byName map[string]struct{} // set of tags when there are many
}

// Compile parses a tag expression: "*" or an empty (or all-blank)
// expression match everything; otherwise the expression is a list of tags
// separated by "||", each trimmed of surrounding white space, empty parts
// dropped and duplicates ignored.
//
// It rejects an expression that leaves no tag ("||"), a part that still
// holds a '|' (a single "|" or a run of three, which is almost certainly a
// typo for "||"), "*" inside a list, a tag holding the 0x01 or 0x02 bytes
// (no stored property can hold them), invalid UTF-8, and expressions longer
// than MaxExprLen.
func Compile(expr string) (*Filter, error) {
	if len(expr) > MaxExprLen {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLong, len(expr), MaxExprLen)
	}
	if !utf8.ValidString(expr) {
		return nil, fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalid, clip(expr))
	}
	trimmed := strings.TrimSpace(expr)
	if trimmed == "" || trimmed == All {
		return &Filter{all: true}, nil
	}
	f := &Filter{}
	seen := make(map[string]struct{})
	for part := range strings.SplitSeq(trimmed, separator) {
		t := strings.TrimSpace(part)
		switch {
		case t == "":
			continue
		case t == All:
			return nil, fmt.Errorf("%w: %q must stand alone, not inside a list of tags", ErrInvalid, All)
		case strings.Contains(t, "|"):
			return nil, fmt.Errorf("%w: tag %q holds '|'; separate tags with %q", ErrInvalid, clip(t), separator)
		case strings.ContainsAny(t, "\x01\x02"):
			return nil, fmt.Errorf("%w: tag %q holds a property separator byte (0x01 or 0x02)", ErrInvalid, clip(t))
		}
		if _, dup := seen[t]; !dup {
			seen[t] = struct{}{}
			f.tags = append(f.tags, t)
		}
	}
	if len(f.tags) == 0 {
		return nil, fmt.Errorf("%w: %q names no tag", ErrInvalid, clip(expr))
	}
	for _, t := range f.tags {
		f.hashes = append(f.hashes, message.TagHash(t))
	}
	slices.Sort(f.hashes)
	f.hashes = slices.Compact(f.hashes)
	if len(f.tags) > smallSet {
		f.byName = seen
	}
	return f, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// IsAll reports whether f matches every message.
func (f *Filter) IsAll() bool { return f.all }

// Tags returns the distinct tags of f in the order they first appear, or
// nil for a filter that matches everything. The caller must not modify the
// slice.
func (f *Filter) Tags() []string { return f.tags }

// String returns the canonical form of f: "*", or its tags joined by " || ".
func (f *Filter) String() string {
	if f.all {
		return All
	}
	return strings.Join(f.tags, " "+separator+" ")
}

// MatchTagHash reports whether a consume-queue entry with this tag hash may
// match: always for "*", else when the hash is one of the tags' hashes. Two
// tags can share a hash, so a true answer is only a "may match"; the
// clients check the tag string again.
func (f *Filter) MatchTagHash(hash int64) bool {
	if f.all {
		return true
	}
	if len(f.hashes) <= smallSet {
		for _, h := range f.hashes {
			if h == hash {
				return true
			}
		}
		return false
	}
	_, found := slices.BinarySearch(f.hashes, hash)
	return found
}

// NeedsRecord reports false: the tag hash kept in each consume-queue entry
// decides on the broker, and the clients compare tag strings themselves.
func (f *Filter) NeedsRecord() bool { return false }

// MatchTag reports whether a message whose TAGS property is tag matches
// exactly (by string, not by hash).
func (f *Filter) MatchTag(tag string) bool {
	if f.all {
		return true
	}
	if f.byName != nil {
		_, ok := f.byName[tag]
		return ok
	}
	return slices.Contains(f.tags, tag)
}

func (f *Filter) matchBytes(tag []byte) bool {
	if f.byName != nil {
		_, ok := f.byName[string(tag)]
		return ok
	}
	for _, t := range f.tags {
		if t == string(tag) {
			return true
		}
	}
	return false
}

// Match sets out[i] to whether batch[i]'s TAGS property equals one of the
// tags exactly. A record without TAGS matches only "*". It never returns an
// error; the records must be valid (message.Record.Validate).
func (f *Filter) Match(batch []message.Record, out []bool) error {
	for i, r := range batch {
		if f.all {
			out[i] = true
			continue
		}
		v, ok := r.Properties().Lookup(message.PropertyTags)
		out[i] = ok && f.matchBytes(v)
	}
	return nil
}
