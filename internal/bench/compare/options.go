package compare

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rmq-go/rmq/internal/bench/child"
)

// Errors of this package.
var (
	// ErrInvalidOptions is returned, wrapped with every problem found, when
	// Options do not describe a comparison. Nothing runs.
	ErrInvalidOptions = errors.New("compare: invalid options")
	// ErrInstall is returned when nats-server or the nats CLI is not in
	// the cache and go install could not build it.
	ErrInstall = errors.New("compare: cannot install")
	// ErrServer is returned when a server did not start, or did not say
	// where it listens, in time. It is child.ErrNotReady.
	ErrServer = child.ErrNotReady
	// ErrNatsBench is returned when `nats bench` failed or printed no
	// result this package can read.
	ErrNatsBench = errors.New("compare: nats bench failed")
	// ErrRun is returned when this broker's side of a run moved no
	// message or failed to set up.
	ErrRun = errors.New("compare: rmq-go run failed")
)

// Defaults of Options.
const (
	DefaultRounds       = 3
	DefaultDuration     = 10 * time.Second
	DefaultSize         = 1024
	DefaultConsumeCount = 500_000
	// The defaults under Options.Quick.
	QuickRounds       = 1
	QuickDuration     = 2 * time.Second
	QuickConsumeCount = 100_000
)

// Options configures Run. The zero value of each field but Broker means
// its default.
type Options struct {
	// Broker is the path of the rmq-go broker executable to measure;
	// required.
	Broker string
	// CacheDir holds the nats-server and nats CLI binaries; default
	// rmq-go/bench under os.UserCacheDir.
	CacheDir string
	// Go is the go command that installs them when they are not there
	// yet; default "go" on PATH.
	Go string
	// NatsServerVersion and NatsCLIVersion are the versions installed;
	// defaults DefaultNatsServerVersion and DefaultNatsCLIVersion.
	NatsServerVersion string
	NatsCLIVersion    string
	// Quick makes the defaults of Rounds, Duration and ConsumeCount
	// QuickRounds, QuickDuration and QuickConsumeCount: a smoke run of
	// about a minute. Fields set explicitly keep their values.
	Quick bool
	// Rounds is the number of runs of each system per pairing; default 3.
	Rounds int
	// Duration is the length of each measured produce run; default 10 s.
	Duration time.Duration
	// Size is the body of every message in bytes; default 1024.
	Size int
	// ConsumeCount is the number of messages written and then read back
	// in the catch-up pairing; default 500,000.
	ConsumeCount int64
	// Pairings lists the pairings to run, by number (1 to 7, see the
	// package documentation); default all. Pairing 7 runs at half of
	// pairing 1's rates, so asking for 7 runs 1 too.
	Pairings []int
	// TempDir is where each server gets its data directory; default
	// os.TempDir.
	TempDir string
}

// withDefaults returns a copy of o with zero fields set to their defaults
// and Pairings sorted, without repeats, with 1 added when 7 is there.
func (o Options) withDefaults() (Options, error) {
	if o.CacheDir == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return o, fmt.Errorf("%w: CacheDir: none given and %v", ErrInvalidOptions, err)
		}
		o.CacheDir = filepath.Join(dir, "rmq-go", "bench")
	}
	if o.Go == "" {
		o.Go = "go"
	}
	if o.NatsServerVersion == "" {
		o.NatsServerVersion = DefaultNatsServerVersion
	}
	if o.NatsCLIVersion == "" {
		o.NatsCLIVersion = DefaultNatsCLIVersion
	}
	rounds, duration, count := DefaultRounds, DefaultDuration, int64(DefaultConsumeCount)
	if o.Quick {
		rounds, duration, count = QuickRounds, QuickDuration, QuickConsumeCount
	}
	if o.Rounds == 0 {
		o.Rounds = rounds
	}
	if o.Duration == 0 {
		o.Duration = duration
	}
	if o.ConsumeCount == 0 {
		o.ConsumeCount = count
	}
	if o.Size == 0 {
		o.Size = DefaultSize
	}
	if len(o.Pairings) == 0 {
		for _, p := range pairings {
			o.Pairings = append(o.Pairings, p.id)
		}
	}
	o.Pairings = slices.Clone(o.Pairings)
	if slices.Contains(o.Pairings, latencyPairing) && !slices.Contains(o.Pairings, rateSource) {
		o.Pairings = append(o.Pairings, rateSource)
	}
	slices.Sort(o.Pairings)
	o.Pairings = slices.Compact(o.Pairings)
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	return o, nil
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
	if o.Rounds < 0 {
		bad("Rounds %d is negative", o.Rounds)
	}
	if o.Duration < 0 {
		bad("Duration %v is negative", o.Duration)
	} else if o.Duration < time.Second {
		bad("Duration %v is under a second: /proc counts CPU in 10 ms ticks", o.Duration)
	}
	if o.Size < 0 || o.Size > maxSize {
		bad("Size %d is not between 1 and %d", o.Size, maxSize)
	}
	if o.ConsumeCount < 0 {
		bad("ConsumeCount %d is negative", o.ConsumeCount)
	}
	for _, id := range o.Pairings {
		if pairingByID(id) == nil {
			bad("pairing %d does not exist (1 to %d)", id, len(pairings))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, strings.Join(problems, "; "))
	}
	return nil
}

// maxSize is the largest message compare sends, a 32-message batch within
// the broker's 4 MiB request limit.
const maxSize = (4 << 20) / 32
