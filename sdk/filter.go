package sdk

import (
	"fmt"

	"github.com/rmq-go/rmq/sdk/abi"
)

// Filter compiles the subscription expressions of the plugin's expression
// type. Compile runs once per distinct expression (the module caches the
// result, errors included); the expression string is the module's own copy.
type Filter interface {
	Compile(expression string) (Matcher, error)
}

// BodyFilter is a Filter that may ask for message bodies. Bodies cost a copy
// into the module for every record, so ask only when the expression type
// reads them.
type BodyFilter interface {
	Filter
	NeedsBody() bool
}

// BodyInflater is a BodyFilter that wants compressed bodies inflated by
// the broker: when InflateBodies reports true (asked after Init, with
// NeedsBody), Message.Body is the body as the producer wrote it and
// Compressed is false, unless the broker could not inflate it (corrupt, or
// larger than it inflates: 4 MiB), in which case the body comes as stored
// and Compressed is true. It needs a broker of ABI v1.1 or later.
type BodyInflater interface {
	BodyFilter
	InflateBodies() bool
}

// BodyFilterFunc adapts a function to a Filter that reads bodies, inflated
// by the broker (a BodyInflater): the simplest way to write a body filter.
type BodyFilterFunc func(expression string) (Matcher, error)

// Compile calls f.
func (f BodyFilterFunc) Compile(expression string) (Matcher, error) { return f(expression) }

// NeedsBody reports true: batches carry bodies.
func (BodyFilterFunc) NeedsBody() bool { return true }

// InflateBodies reports true: the broker inflates compressed bodies.
func (BodyFilterFunc) InflateBodies() bool { return true }

// Matcher is a compiled expression.
type Matcher interface {
	// Match reports whether m matches. An error stops the batch and the
	// broker holds the subscription: it never counts as "no match".
	Match(m *Message) (bool, error)
}

// PropertyReader is a Matcher that reads only some properties. The broker
// then sends, for that expression, only the properties named by
// PropertyKeys (an empty list: none), which spares the matcher scanning the
// rest; Message.Properties and Message.Property see just those. Tags and
// Keys are unaffected.
type PropertyReader interface {
	Matcher
	PropertyKeys() []string
}

// ValueFilter is a Filter that takes, for each matcher that is a
// PropertyReader, the values of the properties it names already looked
// up by the broker (ABI v1.4): when ResolvesValues reports true (asked
// after Init), Message.Value(i) and Message.Values give the value of the
// i-th key PropertyKeys listed without scanning anything, which is the
// cheapest way for a guest to read properties. Message.Property and
// Message.Properties still work, over the named keys. A matcher that is
// not a PropertyReader gets every property, as without this. It needs a
// broker of ABI v1.4 or later.
type ValueFilter interface {
	Filter
	ResolvesValues() bool
}

// ValueFilterFunc adapts a function to a ValueFilter that asks for
// resolved values.
type ValueFilterFunc func(expression string) (Matcher, error)

// Compile calls f.
func (f ValueFilterFunc) Compile(expression string) (Matcher, error) { return f(expression) }

// ResolvesValues reports true.
func (ValueFilterFunc) ResolvesValues() bool { return true }

// FilterFunc adapts a function to Filter.
type FilterFunc func(expression string) (Matcher, error)

// Compile calls f.
func (f FilterFunc) Compile(expression string) (Matcher, error) { return f(expression) }

// MatcherFunc adapts a function to Matcher.
type MatcherFunc func(m *Message) (bool, error)

// Match calls f.
func (f MatcherFunc) Match(m *Message) (bool, error) { return f(m) }

// compiledExpr is one cached Compile result.
type compiledExpr struct {
	expr string
	m    Matcher
	err  error
	// names are the keys the matcher reads (PropertyReader), and values
	// whether its records carry them resolved (filterValues).
	names  []string
	values bool
}

// matcher returns the compiled form of expr, compiling it on first sight.
// A hit allocates nothing.
func matcher(expr []byte) *compiledExpr {
	if c := state.lastExpr; c != nil && c.expr == string(expr) {
		return c
	}
	c, ok := state.exprs[string(expr)]
	if !ok {
		s := string(expr)
		m, err := state.filter.Compile(s)
		if err == nil && m == nil {
			err = fmt.Errorf("Compile(%q) returned no matcher", s)
		}
		c = &compiledExpr{expr: s, m: m, err: err}
		if pr, ok := m.(PropertyReader); ok && err == nil {
			c.names = pr.PropertyKeys()
			c.values = filterValues() && len(c.names) <= abi.MaxFilterKeys
		}
		if state.exprs == nil || len(state.exprs) >= maxCachedExpressions {
			state.exprs = make(map[string]*compiledExpr)
		}
		state.exprs[s] = c
	}
	state.lastExpr = c
	return c
}

// runFilter is broker_filter: in holds the batch, out has one byte per
// record.
func runFilter(in []byte, count uint32, out []byte) abi.Status {
	if state.filter == nil {
		return fail(abi.StatusNotImplemented, "this module registers no filter")
	}
	expr, rest, err := abi.ReadFilterHeader(in)
	if err != nil {
		return fail(abi.StatusBadInput, "filter batch header does not parse")
	}
	c := matcher(expr)
	if c.err != nil {
		return fail(abi.StatusBadExpression, c.err.Error())
	}
	if uint64(len(out)) < uint64(count) {
		return fail(abi.StatusBadInput, "output shorter than the record count")
	}
	m := &state.msg
	for i := range count {
		if rest, err = abi.ReadFilterRecord(rest, &m.r); err != nil {
			return fail(abi.StatusBadInput, "filter record does not parse")
		}
		if m.resolved = c.values; c.values {
			m.names, m.built = c.names, false
			if m.present, err = abi.ReadFilterValues(m.r.Properties, m.vals[:len(c.names)]); err != nil {
				return fail(abi.StatusBadInput, "filter record's values do not parse")
			}
		}
		ok, err := c.m.Match(m)
		if err != nil {
			return fail(abi.StatusFailed, err.Error())
		}
		if ok {
			out[i] = abi.FilterMatch
		} else {
			out[i] = abi.FilterNoMatch
		}
	}
	return abi.StatusOK
}

// runFilterKeys is broker_filter_keys: it returns the key list of the
// expression in the header at in, or nil if the matcher reads every
// property.
func runFilterKeys(in []byte) ([]byte, abi.Status) {
	if state.filter == nil {
		return nil, fail(abi.StatusNotImplemented, "this module registers no filter")
	}
	expr, _, err := abi.ReadFilterHeader(in)
	if err != nil {
		return nil, fail(abi.StatusBadInput, "filter batch header does not parse")
	}
	c := matcher(expr)
	if c.err != nil {
		return nil, fail(abi.StatusBadExpression, c.err.Error())
	}
	if _, ok := c.m.(PropertyReader); !ok {
		return nil, abi.StatusOK
	}
	b, err := abi.AppendKeyList(state.keys[:0], c.names)
	if err != nil {
		return nil, fail(abi.StatusFailed, fmt.Sprintf("PropertyKeys: more than %d keys, or one too long", abi.MaxFilterKeys))
	}
	state.keys = b
	return b, abi.StatusOK
}
