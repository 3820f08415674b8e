package broker

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Group attributes are RocketMQ's SubscriptionGroupConfig.attributes: named
// values an operator sets with mqadmin's updateSubGroup -a +name=value (or
// a config file's groups[].attributes), kept and listed under their names.

// PriorityFactorAttribute is the share, 0 to 100, of a group's POP
// receives from a PRIORITY topic that take the highest priority first
// (RocketMQ's priority.factor; default 100). The others go round the
// queues, so low priorities are not starved while high ones are busy.
const PriorityFactorAttribute = "priority.factor"

// groupAttributes are the attributes a group may have, each with the
// check of its value.
var groupAttributes = map[string]func(string) error{
	PriorityFactorAttribute: func(v string) error {
		if n, err := strconv.Atoi(v); err != nil || n < 0 || n > 100 {
			return fmt.Errorf("%q is not a whole number 0..100", v)
		}
		return nil
	},
}

// checkGroupAttributes reports attributes that are unknown or whose value
// is wrong.
func checkGroupAttributes(group string, attrs map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		check, ok := groupAttributes[k]
		if !ok {
			return fmt.Errorf("broker: group %s: unknown attribute %q (known: %s)", group, k, strings.Join(slices.Sorted(maps.Keys(groupAttributes)), ", "))
		}
		if err := check(attrs[k]); err != nil {
			return fmt.Errorf("broker: group %s: attribute %s: %w", group, k, err)
		}
	}
	return nil
}

// alterGroupAttributes applies an update's attributes to old, as RocketMQ
// does: "+name" sets name, "-name" removes it; a bare name, the form a
// configuration is listed in, sets it too. old is not changed.
// Removals come last, so "-name" wins over a name set in the same update.
func alterGroupAttributes(old, update map[string]string) map[string]string {
	out := maps.Clone(old)
	for k, v := range update {
		if !strings.HasPrefix(k, "-") {
			if out == nil {
				out = map[string]string{}
			}
			out[strings.TrimPrefix(k, "+")] = v
		}
	}
	for k := range update {
		if strings.HasPrefix(k, "-") {
			delete(out, k[1:])
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// ParseGroupAttributes reads mqadmin's form of an attributes update,
// "+name=value,-name,...", into the map an update carries.
func ParseGroupAttributes(s string) (map[string]string, error) {
	out := map[string]string{}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		k, v, hasValue := strings.Cut(item, "=")
		switch {
		case item == "":
			continue
		case strings.HasPrefix(k, "+") && hasValue && len(k) > 1:
			out[k] = v
		case strings.HasPrefix(k, "-") && !hasValue && len(k) > 1:
			out[k] = ""
		default:
			return nil, fmt.Errorf("attribute %q: want +name=value to set or -name to remove", item)
		}
	}
	return out, nil
}

// priorityFactor is the group's PriorityFactorAttribute, 100 when unset.
func (gc SubscriptionGroupConfig) priorityFactor() int {
	if n, err := strconv.Atoi(gc.Attributes[PriorityFactorAttribute]); err == nil {
		return n
	}
	return 100
}
