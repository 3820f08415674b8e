package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/sdk"
)

// policy is the configured backoff.
type policy struct {
	max    int32
	base   time.Duration
	cap    time.Duration
	giveUp sdk.Action
}

// defaults follow RocketMQ's checker: a first check after 6 s, at most a
// minute apart, 15 checks.
var defaults = policy{max: 15, base: 6 * time.Second, cap: time.Minute, giveUp: sdk.Discard}

func (p *policy) Init(config []byte) error {
	*p = defaults
	for _, w := range strings.Fields(string(config)) {
		k, v, ok := strings.Cut(w, "=")
		if !ok {
			return fmt.Errorf("config word %q: want key=value", w)
		}
		var err error
		switch k {
		case "max":
			var n int
			n, err = strconv.Atoi(v)
			if err == nil && n < 1 {
				err = fmt.Errorf("must be at least 1")
			}
			p.max = int32(n)
		case "base":
			p.base, err = time.ParseDuration(v)
			if err == nil && p.base <= 0 {
				err = fmt.Errorf("must be positive")
			}
		case "cap":
			p.cap, err = time.ParseDuration(v)
			if err == nil && p.cap <= 0 {
				err = fmt.Errorf("must be positive")
			}
		case "giveup":
			switch v {
			case "discard":
				p.giveUp = sdk.Discard
			case "rollback":
				p.giveUp = sdk.Rollback
			default:
				err = fmt.Errorf("want discard or rollback")
			}
		default:
			err = fmt.Errorf("unknown key")
		}
		if err != nil {
			return fmt.Errorf("config %s=%s: %v", k, v, err)
		}
	}
	if p.cap < p.base {
		return fmt.Errorf("config: cap %v is below base %v", p.cap, p.base)
	}
	p.addTests()
	return nil
}

// due returns how long after the store time check k is due.
func (p *policy) due(k int32) time.Duration {
	var d time.Duration
	step := p.base
	for i := int32(0); i <= k; i++ {
		d += step
		if step < p.cap {
			step = min(2*step, p.cap)
		}
	}
	return d
}

func (p *policy) Check(m *sdk.HalfMessage, nowMs int64) (sdk.Decision, error) {
	k := m.CheckTimes()
	if k >= p.max {
		return sdk.Decision{Action: p.giveUp}, nil
	}
	dueMs := m.StoreTimestamp() + p.due(k).Milliseconds()
	if k == 0 {
		if s, ok := m.Properties().Lookup("CHECK_IMMUNITY_TIME_IN_SECONDS"); ok {
			if sec, err := strconv.ParseInt(s, 10, 64); err == nil && sec > 0 {
				dueMs = max(dueMs, m.StoreTimestamp()+sec*1000)
			}
		}
	}
	if nowMs < dueMs {
		return sdk.Decision{Action: sdk.Wait, Wait: time.Duration(dueMs-nowMs) * time.Millisecond}, nil
	}
	return sdk.Decision{Action: sdk.CheckNow}, nil
}

// addTests registers vectors derived from the configuration, so the canary
// checks the policy the broker will actually run.
func (p *policy) addTests() {
	const stored = 1_000_000
	first := p.due(0).Milliseconds()
	sdk.AddTxnTest(sdk.TxnTest{NowMs: stored, Message: sdk.TestHalfMessage{StoreTimestamp: stored},
		Want: sdk.Decision{Action: sdk.Wait, Wait: time.Duration(first) * time.Millisecond}})
	sdk.AddTxnTest(sdk.TxnTest{NowMs: stored + first, Message: sdk.TestHalfMessage{StoreTimestamp: stored},
		Want: sdk.Decision{Action: sdk.CheckNow}})
	sdk.AddTxnTest(sdk.TxnTest{NowMs: stored, Message: sdk.TestHalfMessage{StoreTimestamp: stored, CheckTimes: p.max},
		Want: sdk.Decision{Action: p.giveUp}})
}

func init() {
	sdk.RegisterTxnPolicy(&policy{})
	sdk.SetVersion("1.0.0")
}

func main() {}
