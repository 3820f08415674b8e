package broker

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rmq-go/rmq/core/message"
)

// DefaultDelayLevels is RocketMQ's delay-level table.
const DefaultDelayLevels = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

// DefaultMaxTimerDelay bounds how far ahead a timed message may be due.
const DefaultMaxTimerDelay = 72 * time.Hour

// ParseDelayLevels parses a space-separated list of durations with the
// units s, m, h or d ("1s 5s 10s 30s 1m …"). An error names the token.
func ParseDelayLevels(s string) ([]time.Duration, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, errors.New("delay levels: the list is empty")
	}
	out := make([]time.Duration, 0, len(fields))
	for i, tok := range fields {
		if len(tok) < 2 {
			return nil, fmt.Errorf("delay levels: token %d %q: want a number with a unit s, m, h or d", i+1, tok)
		}
		unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[tok[len(tok)-1]]
		n, err := strconv.ParseInt(tok[:len(tok)-1], 10, 32)
		if unit == 0 || err != nil || n <= 0 {
			return nil, fmt.Errorf("delay levels: token %d %q: want a positive whole number with a unit s, m, h or d", i+1, tok)
		}
		out = append(out, time.Duration(n)*unit)
	}
	return out, nil
}

// FormatDelayLevels is the inverse of ParseDelayLevels.
func FormatDelayLevels(levels []time.Duration) string {
	parts := make([]string, len(levels))
	for i, d := range levels {
		switch {
		case d%(24*time.Hour) == 0:
			parts[i] = strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
		case d%time.Hour == 0:
			parts[i] = strconv.FormatInt(int64(d/time.Hour), 10) + "h"
		case d%time.Minute == 0:
			parts[i] = strconv.FormatInt(int64(d/time.Minute), 10) + "m"
		default:
			parts[i] = strconv.FormatInt(int64(d/time.Second), 10) + "s"
		}
	}
	return strings.Join(parts, " ")
}

// TagCode is the store's Options.TagCode for a broker with these delay
// levels: the due time (ms) for scheduled and timed messages, the tag hash
// for everything else. It depends on the record alone, so recovery
// computes the same units again.
func TagCode(levels []time.Duration) func(r message.Record) int64 {
	return func(r message.Record) int64 {
		switch string(r.Topic()) {
		case ScheduleTopic:
			level := int(r.QueueID()) + 1
			if level > len(levels) {
				level = len(levels)
			}
			return r.StoreTimestamp() + levels[level-1].Milliseconds()
		case TimerTopic:
			if v, ok := r.Properties().Lookup(message.PropertyTimerDeliverMS); ok {
				if due, err := strconv.ParseInt(string(v), 10, 64); err == nil {
					return due
				}
			}
			return r.StoreTimestamp()
		}
		tag, ok := r.Properties().Lookup(message.PropertyTags)
		if !ok {
			return 0
		}
		return message.TagHashBytes(tag)
	}
}

// toSchedule parks a delayed message (DELAY level) in the schedule topic,
// or a timed one (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS) in the
// timer topic, keeping where it was going in REAL_TOPIC and REAL_QID.
func (b *Broker) toSchedule(m *message.Message) error {
	p := m.Properties
	due, timed, err := b.timerDue(p)
	if err != nil {
		return refusef(ErrIllegal, "%w", err)
	}
	if timed {
		if due <= b.now().UnixMilli() {
			// Already due: deliver it now, without the timer properties.
			m.Properties = p.Without(message.PropertyTimerDeliverMS, message.PropertyTimerDelaySec, message.PropertyTimerDelayMS)
			return nil
		}
		m.Properties = p.Without(message.PropertyTimerDelaySec, message.PropertyTimerDelayMS).
			With(message.PropertyTimerDeliverMS, strconv.FormatInt(due, 10)).
			With(message.PropertyRealTopic, m.Topic).
			With(message.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
		m.Topic, m.QueueID = TimerTopic, 0
		return nil
	}
	v, ok := p.Lookup(message.PropertyDelayLevel)
	if !ok {
		return nil
	}
	level, err := strconv.Atoi(string(v))
	if err != nil {
		return refusef(ErrIllegal, "property DELAY %q is not a level number", v)
	}
	if level <= 0 {
		return nil
	}
	level = min(level, len(b.levels))
	m.Properties = p.With(message.PropertyDelayLevel, strconv.Itoa(level)).
		With(message.PropertyRealTopic, m.Topic).
		With(message.PropertyRealQueueID, strconv.Itoa(int(m.QueueID)))
	m.Topic, m.QueueID = ScheduleTopic, int32(level-1)
	return nil
}

// timerDue reads a timed message's due time (ms).
func (b *Broker) timerDue(p message.Properties) (due int64, timed bool, err error) {
	now := b.now()
	var at time.Time
	switch {
	case p.Has(message.PropertyTimerDeliverMS):
		ms, err := strconv.ParseInt(p.Get(message.PropertyTimerDeliverMS), 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("property %s %q is not a time in ms", message.PropertyTimerDeliverMS, p.Get(message.PropertyTimerDeliverMS))
		}
		at = time.UnixMilli(ms)
	case p.Has(message.PropertyTimerDelaySec):
		d, err := b.timerDelay(p, message.PropertyTimerDelaySec, time.Second)
		if err != nil {
			return 0, false, err
		}
		at = now.Add(d)
	case p.Has(message.PropertyTimerDelayMS):
		d, err := b.timerDelay(p, message.PropertyTimerDelayMS, time.Millisecond)
		if err != nil {
			return 0, false, err
		}
		at = now.Add(d)
	default:
		return 0, false, nil
	}
	if at.Sub(now) > b.opts.MaxTimerDelay {
		return 0, false, fmt.Errorf("delivery time %s is %v ahead, beyond the maximum of %v", at.UTC().Format(time.RFC3339), at.Sub(now).Round(time.Second), b.opts.MaxTimerDelay)
	}
	return at.UnixMilli(), true, nil
}

// levelDelay returns the delay of a level (1-based), clamped to the table.
func (b *Broker) levelDelay(level int) time.Duration {
	level = max(1, min(level, len(b.levels)))
	return b.levels[level-1]
}

// timerDelay reads a relative delay property in the given unit.
func (b *Broker) timerDelay(p message.Properties, key string, unit time.Duration) (time.Duration, error) {
	n, err := strconv.ParseInt(p.Get(key), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("property %s %q is not a non-negative whole number", key, p.Get(key))
	}
	if n > int64(b.opts.MaxTimerDelay/unit)+1 {
		return 0, fmt.Errorf("timer delay %s=%d exceeds the maximum of %v", key, n, b.opts.MaxTimerDelay)
	}
	return time.Duration(n) * unit, nil
}
