package broker

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

func TestRetryPolicyDelay(t *testing.T) {
	levels, _ := ParseDelayLevels(DefaultDelayLevels)
	ladder := SubscriptionGroupConfig{RetryMaxTimes: 16}.RetryPolicy(levels)
	own := SubscriptionGroupConfig{RetryMaxTimes: 2, GroupRetryPolicy: &GroupRetryPolicy{CustomizedRetryPolicy: &CustomizedRetryPolicy{Next: []int64{100, 2000}}}}.RetryPolicy(levels)
	expDefault := SubscriptionGroupConfig{GroupRetryPolicy: &GroupRetryPolicy{Type: RetryPolicyExponential}}.RetryPolicy(levels)
	exp := SubscriptionGroupConfig{GroupRetryPolicy: &GroupRetryPolicy{Type: RetryPolicyExponential, ExponentialRetryPolicy: &ExponentialRetryPolicy{Initial: 1000, Max: 10000, Multiplier: 3}}}.RetryPolicy(levels)
	huge := SubscriptionGroupConfig{GroupRetryPolicy: &GroupRetryPolicy{Type: RetryPolicyExponential, ExponentialRetryPolicy: &ExponentialRetryPolicy{Initial: 1000, Max: 1 << 40, Multiplier: 1 << 40}}}.RetryPolicy(levels)
	if ladder.MaxAttempts != 17 || own.MaxAttempts != 3 || !slices.Equal(ladder.Next, levels) {
		t.Fatalf("ladder %+v, own %+v", ladder, own)
	}
	for _, c := range []struct {
		name    string
		p       RetryPolicy
		attempt int
		want    time.Duration
	}{
		{"ladder first", ladder, 1, time.Second},
		{"ladder second", ladder, 2, 5 * time.Second},
		{"ladder fourth", ladder, 4, 30 * time.Second},
		{"ladder last", ladder, 18, 2 * time.Hour},
		{"ladder past its end", ladder, 40, 2 * time.Hour},
		{"attempt 0 as 1", ladder, 0, time.Second},
		{"own ladder", own, 1, 100 * time.Millisecond},
		{"own ladder past its end", own, 5, 2 * time.Second},
		{"exponential defaults", expDefault, 1, 5 * time.Second},
		{"exponential defaults second", expDefault, 2, 10 * time.Second},
		{"exponential", exp, 1, time.Second},
		{"exponential third", exp, 3, 9 * time.Second},
		{"exponential capped", exp, 4, 10 * time.Second},
		{"exponential no overflow", huge, 60, 1 << 40 * time.Millisecond},
	} {
		if got := c.p.Delay(c.attempt); got != c.want {
			t.Errorf("%s: Delay(%d) = %v, want %v", c.name, c.attempt, got, c.want)
		}
	}
}

func TestGroupRetryPolicyJSON(t *testing.T) {
	// RocketMQ 5's form of the field.
	var gc SubscriptionGroupConfig
	body := `{"groupName":"g","retryMaxTimes":3,"groupRetryPolicy":{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":1000,"max":60000,"multiplier":2}}}`
	if err := json.Unmarshal([]byte(body), &gc); err != nil {
		t.Fatal(err)
	}
	if p := gc.RetryPolicy(nil); !p.Exponential || p.Initial != time.Second || p.Max != time.Minute || p.Multiplier != 2 || p.MaxAttempts != 4 {
		t.Fatalf("%+v", p)
	}
	for _, bad := range []*GroupRetryPolicy{
		{Type: "LINEAR"},
		{Type: RetryPolicyExponential, ExponentialRetryPolicy: &ExponentialRetryPolicy{Initial: 0, Max: 10, Multiplier: 2}},
		{Type: RetryPolicyExponential, ExponentialRetryPolicy: &ExponentialRetryPolicy{Initial: 10, Max: 5, Multiplier: 2}},
		{CustomizedRetryPolicy: &CustomizedRetryPolicy{Next: []int64{1000, -1}}},
	} {
		if err := checkGroupConfig(SubscriptionGroupConfig{GroupName: "g", GroupRetryPolicy: bad}); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
