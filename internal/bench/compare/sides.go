package compare

import (
	"fmt"
	"os"
	"strings"
	"time"
)

// sideOptions are the options every side-by-side run of this broker
// against itself shares (RunReplication, RunProtocols).
type sideOptions struct {
	broker   *string
	rounds   *int
	duration *time.Duration
	size     *int
	loads    *[]int
	tempDir  *string
}

// defaults fills in the zero fields.
func (s sideOptions) defaults(loads int) {
	if *s.rounds == 0 {
		*s.rounds = DefaultRounds
	}
	if *s.duration == 0 {
		*s.duration = DefaultDuration
	}
	if *s.size == 0 {
		*s.size = DefaultSize
	}
	if len(*s.loads) == 0 {
		for id := 1; id <= loads; id++ {
			*s.loads = append(*s.loads, id)
		}
	}
	if *s.tempDir == "" {
		*s.tempDir = os.TempDir()
	}
}

// check returns an error wrapping ErrInvalidOptions with every problem
// of the shared options and of extra, or nil; loads is how many there
// are.
func (s sideOptions) check(loads int, extra ...string) error {
	problems := extra
	if *s.broker == "" {
		problems = append(problems, "Broker: the broker executable is required")
	} else if _, err := os.Stat(*s.broker); err != nil {
		problems = append(problems, fmt.Sprintf("Broker: %v", err))
	}
	if *s.rounds < 0 || *s.duration < time.Second || *s.size < 1 || *s.size > maxSize {
		problems = append(problems, fmt.Sprintf("rounds %d, duration %v, size %d: want rounds ≥ 0, duration ≥ 1s, size 1 to %d",
			*s.rounds, *s.duration, *s.size, maxSize))
	}
	for _, id := range *s.loads {
		if id < 1 || id > loads {
			problems = append(problems, fmt.Sprintf("load %d does not exist (1 to %d)", id, loads))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, strings.Join(problems, "; "))
	}
	return nil
}
