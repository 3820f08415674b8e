package memory

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Errors of this package.
var (
	// ErrInvalidOptions is returned, wrapped with every problem found, when
	// Options do not describe a run. Nothing runs.
	ErrInvalidOptions = errors.New("memory: invalid options")
	// ErrProbe is returned when a stage could not be set up as it says:
	// a connection refused or closed, a request answered with an error,
	// a backlog not stored whole, a long-poll answered instead of held.
	ErrProbe = errors.New("memory: probe failed")
)

// Defaults of Options.
const (
	DefaultConns    = 10_000
	DefaultMessages = 10_000_000
	DefaultPolls    = 1_000
	DefaultSize     = 64
	DefaultSettle   = 2 * time.Second
	// The defaults under Options.Quick.
	QuickConns    = 1_000
	QuickMessages = 200_000
	QuickPolls    = 100
	QuickSettle   = 500 * time.Millisecond
)

// Bounds the options are checked against.
const (
	// maxConns keeps the source addresses within 127.0.0.0/24: one per
	// connsPerSource connections, from 127.0.0.2 on.
	maxConns = connsPerSource * 250
	// maxSize keeps a batch of the backlog within the broker's 4 MiB
	// request limit.
	maxSize = (4 << 20) / backlogBatch
)

// Options configures Run. The zero value of each field but Broker means
// its default.
type Options struct {
	// Broker is the path of the broker executable to measure; required.
	Broker string
	// Quick makes the defaults of Conns, Messages, Polls and Settle
	// QuickConns, QuickMessages, QuickPolls and QuickSettle: a smoke run
	// of well under a minute. Fields set explicitly keep their values.
	Quick bool
	// Conns is the number of idle connections of stage 2; default
	// DefaultConns (10,000).
	Conns int
	// Messages is the backlog of stage 3; default DefaultMessages (10
	// million).
	Messages int64
	// Size is the body of each backlog message in bytes; default 64.
	Size int
	// Polls is the number of long-polls held in stage 4; default
	// DefaultPolls (1,000).
	Polls int
	// Settle is how long each stage waits, once set up, before it reads
	// the broker's memory, so that work the broker does after the last
	// response (closing connections, flushing its index, returning memory
	// to the system) is done or under way; default 2 s.
	Settle time.Duration
	// TempDir is where the broker gets its data directory; default
	// os.TempDir.
	TempDir string
}

// withDefaults returns a copy of o with zero fields set to their defaults.
func (o Options) withDefaults() Options {
	conns, messages, polls, settle := DefaultConns, int64(DefaultMessages), DefaultPolls, DefaultSettle
	if o.Quick {
		conns, messages, polls, settle = QuickConns, QuickMessages, QuickPolls, QuickSettle
	}
	if o.Conns == 0 {
		o.Conns = conns
	}
	if o.Messages == 0 {
		o.Messages = messages
	}
	if o.Polls == 0 {
		o.Polls = polls
	}
	if o.Settle == 0 {
		o.Settle = settle
	}
	if o.Size == 0 {
		o.Size = DefaultSize
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	return o
}

// validate reports every problem of o, which has its defaults filled in,
// in one error wrapping ErrInvalidOptions.
func (o *Options) validate() error {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	if o.Broker == "" {
		bad("Broker: the broker executable is required")
	} else if _, err := os.Stat(o.Broker); err != nil {
		bad("Broker: %v", err)
	}
	if o.Conns < 0 || o.Conns > maxConns {
		bad("Conns %d is not between 1 and %d", o.Conns, maxConns)
	}
	if o.Messages < 0 {
		bad("Messages %d is negative", o.Messages)
	}
	if o.Size < 0 || o.Size > maxSize {
		bad("Size %d is not between 1 and %d", o.Size, maxSize)
	}
	if o.Polls < 0 {
		bad("Polls %d is negative", o.Polls)
	} else if n := o.pollConns(); n > connsPerSource {
		bad("Polls %d need %d connections, more than the broker takes from one address (%d here)", o.Polls, n, connsPerSource)
	}
	if o.Settle < 0 {
		bad("Settle %v is negative", o.Settle)
	} else if o.Settle >= pollSuspend/2 {
		bad("Settle %v must be under %v, half the long-polls' suspend time", o.Settle, pollSuspend/2)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, strings.Join(problems, "; "))
	}
	return nil
}

// pollConns is the number of connections the long-polls are spread over.
func (o *Options) pollConns() int {
	return (o.Polls + pollsPerConn - 1) / pollsPerConn
}
