package broker

import (
	"fmt"
	"time"
)

// Retry policy types of a group (GroupRetryPolicy.Type), as RocketMQ 5
// names them.
const (
	RetryPolicyCustomized  = "CUSTOMIZED"
	RetryPolicyExponential = "EXPONENTIAL"
)

// Defaults of an EXPONENTIAL group policy that names no values: RocketMQ
// 5's.
const (
	DefaultRetryInitial    = 5 * time.Second
	DefaultRetryMax        = 2 * time.Hour
	DefaultRetryMultiplier = 2
)

// GroupRetryPolicy is how RocketMQ 5 consumers of a group space the
// retries of a message they failed to consume (RocketMQ 5's
// groupRetryPolicy of a subscription group, in its JSON form). A group
// without one, or CUSTOMIZED without a list, retries on the broker's
// delay levels.
type GroupRetryPolicy struct {
	// Type is CUSTOMIZED (the default when empty) or EXPONENTIAL.
	Type                   string                  `json:"type"`
	ExponentialRetryPolicy *ExponentialRetryPolicy `json:"exponentialRetryPolicy,omitempty"`
	CustomizedRetryPolicy  *CustomizedRetryPolicy  `json:"customizedRetryPolicy,omitempty"`
}

// ExponentialRetryPolicy waits Initial after the first failed attempt,
// Multiplier times longer after each further one, at most Max; times in
// milliseconds.
type ExponentialRetryPolicy struct {
	Initial    int64 `json:"initial"`
	Max        int64 `json:"max"`
	Multiplier int64 `json:"multiplier"`
}

// CustomizedRetryPolicy waits Next[i] after failed attempt i+1 (the last
// entry after every later one); times in milliseconds.
type CustomizedRetryPolicy struct {
	Next []int64 `json:"next"`
}

// RetryPolicy is a group's retry policy resolved against the broker's
// delay levels: what the gRPC endpoint sends RocketMQ 5 consumers in
// their settings.
type RetryPolicy struct {
	// MaxAttempts counts deliveries, the first included: retryMaxTimes+1.
	MaxAttempts int
	// Exponential selects Initial, Max and Multiplier; otherwise Next is
	// the ladder of waits.
	Exponential  bool
	Initial, Max time.Duration
	Multiplier   int64
	Next         []time.Duration
}

// RetryPolicy returns the group's retry policy with levels, the broker's
// delay levels, standing for a CUSTOMIZED policy without a list of its
// own (RocketMQ's default ladder is its default delay levels).
func (gc SubscriptionGroupConfig) RetryPolicy(levels []time.Duration) RetryPolicy {
	p := RetryPolicy{MaxAttempts: gc.RetryMaxTimes + 1}
	gp := gc.GroupRetryPolicy
	if gp != nil && gp.Type == RetryPolicyExponential {
		p.Exponential = true
		p.Initial, p.Max, p.Multiplier = DefaultRetryInitial, DefaultRetryMax, DefaultRetryMultiplier
		if e := gp.ExponentialRetryPolicy; e != nil {
			p.Initial, p.Max, p.Multiplier = time.Duration(e.Initial)*time.Millisecond, time.Duration(e.Max)*time.Millisecond, e.Multiplier
		}
		return p
	}
	if gp != nil && gp.CustomizedRetryPolicy != nil && len(gp.CustomizedRetryPolicy.Next) > 0 {
		for _, ms := range gp.CustomizedRetryPolicy.Next {
			p.Next = append(p.Next, time.Duration(ms)*time.Millisecond)
		}
		return p
	}
	p.Next = append([]time.Duration(nil), levels...)
	return p
}

// Delay is how long a message waits before delivery attempt+1 after
// delivery attempt (1 the first) failed, as RocketMQ 5 clients read the
// policy: the attempt's entry of the ladder (its last entry past its
// end), or Initial×Multiplier^(attempt-1) up to Max.
func (p RetryPolicy) Delay(attempt int) time.Duration {
	attempt = max(attempt, 1)
	if !p.Exponential {
		if len(p.Next) == 0 {
			return 0
		}
		return p.Next[min(attempt, len(p.Next))-1]
	}
	d := p.Initial
	for range attempt - 1 {
		if p.Multiplier <= 1 || d > p.Max/time.Duration(p.Multiplier) {
			if p.Multiplier > 1 {
				d = p.Max
			}
			break
		}
		d *= time.Duration(p.Multiplier)
	}
	return min(d, p.Max)
}

// checkRetryPolicy reports what is wrong with a group's retry policy.
func checkRetryPolicy(group string, gp *GroupRetryPolicy) error {
	if gp == nil {
		return nil
	}
	switch gp.Type {
	case "", RetryPolicyCustomized, RetryPolicyExponential:
	default:
		return fmt.Errorf("broker: group %s: groupRetryPolicy type %q is neither %s nor %s", group, gp.Type, RetryPolicyCustomized, RetryPolicyExponential)
	}
	if e := gp.ExponentialRetryPolicy; e != nil && (e.Initial <= 0 || e.Max < e.Initial || e.Multiplier < 1) {
		return fmt.Errorf("broker: group %s: exponentialRetryPolicy needs 0 < initial <= max and multiplier >= 1, not %+v", group, *e)
	}
	if c := gp.CustomizedRetryPolicy; c != nil {
		for i, ms := range c.Next {
			if ms < 0 {
				return fmt.Errorf("broker: group %s: customizedRetryPolicy next[%d] is negative (%d ms)", group, i, ms)
			}
		}
	}
	return nil
}
