package broker

import "github.com/rmq-go/rmq/core/message"

// Filter decides which messages of a queue a subscription receives. One
// Filter is compiled per distinct (expression type, expression) and shared by
// every pull that uses it, so implementations are safe for concurrent use.
//
// The pull path asks in two steps. MatchTagHash sees each consume-queue
// entry's tag hash before anything is read from the commit log; entries it
// refuses are skipped cheaply. If NeedsRecord is true, the records that pass
// are read and handed to Match in batches.
//
// An error from Match is never "no match": the pull stops before the first
// record of the failed batch, so no offset moves past a message that was not
// filtered.
type Filter interface {
	// MatchTagHash reports whether an entry with this tag hash may match.
	MatchTagHash(hash int64) bool
	// NeedsRecord reports whether Match must be consulted.
	NeedsRecord() bool
	// Match sets out[i] for each record in batch; len(out) == len(batch).
	Match(batch []message.Record, out []bool) error
}

// FilterFactory compiles the subscription expressions of one expression
// type ("TAG", "SQL92", or a name a plugin registers). Compile errors are
// returned to the subscribing client, so they name the problem and, for a
// syntax error, its position.
type FilterFactory interface {
	Compile(expression string) (Filter, error)
}

// FilterFactoryFunc adapts a function to FilterFactory.
type FilterFactoryFunc func(expression string) (Filter, error)

// Compile calls f.
func (f FilterFactoryFunc) Compile(expression string) (Filter, error) { return f(expression) }
