package apacheimport

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Skip is something of the Apache broker's that is not imported, and why.
type Skip struct {
	Kind   string // "topic", "group", "offsets", "delay offsets", "forbidden", "attribute"
	Name   string
	Reason string
}

// TopicStep is a topic to create (or update to Apache's settings).
type TopicStep struct {
	Config TopicConfig
	// MessageType is the RocketMQ 5 message type of Apache's
	// "message.type" attribute ("" for none).
	MessageType string
}

// GroupStep is a consumer group to create (or update): Apache's
// configuration with every field it left out at Apache's default.
type GroupStep struct {
	Config GroupConfig
}

// OffsetStep is the committed offset of a group on one queue: the next
// message the group consumes there.
type OffsetStep struct {
	Topic, Group string
	QueueID      int32
	Offset       int64
}

// Plan is everything an import does, decided before anything is
// changed: the steps in the order to take them, and what is left out.
type Plan struct {
	Topics  []TopicStep
	Groups  []GroupStep
	Offsets []OffsetStep // sorted by topic, group and queue
	Skipped []Skip
	Config  Config // broker.conf mapped onto this broker's YAML
	Notes   []string
}

// NewPlan decides what to import from src.
func NewPlan(src *Source) *Plan {
	p := &Plan{Notes: slices.Clone(src.Notes)}
	p.Config = MapBrokerConf(src.BrokerConf)
	cluster, brokerName := "DefaultCluster", ""
	for _, kv := range src.BrokerConf {
		switch kv.Key {
		case "brokerClusterName":
			cluster = strings.TrimSpace(kv.Value)
		case "brokerName":
			brokerName = strings.TrimSpace(kv.Value)
		}
	}

	topics := map[string]TopicConfig{}
	if src.Topics != nil {
		for _, name := range slices.Sorted(maps.Keys(src.Topics.TopicConfigTable)) {
			tc := src.Topics.TopicConfigTable[name]
			tc.TopicName = name // the table's key is what Apache looks topics up by
			if reason := systemTopic(name, tc, cluster, brokerName); reason != "" {
				p.skip("topic", name, reason)
				continue
			}
			if reason := badTopic(name, tc); reason != "" {
				p.skip("topic", name, reason)
				continue
			}
			step := TopicStep{Config: tc}
			for _, k := range slices.Sorted(maps.Keys(tc.Attributes)) {
				if strings.TrimLeft(k, "+-") == "message.type" {
					step.MessageType = strings.ToUpper(tc.Attributes[k])
					continue
				}
				p.skip("attribute", name+" "+k+"="+tc.Attributes[k], "no equivalent in this broker")
			}
			topics[name] = tc
			p.Topics = append(p.Topics, step)
		}
	}

	if src.Groups != nil {
		for _, name := range slices.Sorted(maps.Keys(src.Groups.SubscriptionGroupTable)) {
			if reason := systemGroup(name); reason != "" {
				p.skip("group", name, reason)
				continue
			}
			if !validName.MatchString(name) {
				p.skip("group", name, "not a valid group name (letters, digits, %, |, - and _, at most 255)")
				continue
			}
			gc := withGroupDefaults(src.Groups.SubscriptionGroupTable[name])
			gc.GroupName = name
			p.Groups = append(p.Groups, GroupStep{Config: gc})
		}
		for _, group := range slices.Sorted(maps.Keys(src.Groups.ForbiddenTable)) {
			p.skip("forbidden", group, "forbidden topics of a group have no equivalent in this broker (use acl)")
		}
	}

	if src.Offsets != nil {
		for _, key := range slices.Sorted(maps.Keys(src.Offsets.OffsetTable)) {
			table := src.Offsets.OffsetTable[key]
			topic, group, ok := strings.Cut(key, "@")
			if !ok || strings.Contains(group, "@") || topic == "" || group == "" {
				p.skip("offsets", key, "not topic@group")
				continue
			}
			tc, known := topics[topic]
			switch {
			case systemGroup(group) != "":
				p.skip("offsets", key, "Apache's system group")
				continue
			case strings.HasPrefix(topic, "%RETRY%"):
				p.skip("offsets", key, "a retry topic: its messages are not migrated, and this broker's starts empty")
				continue
			case systemTopic(topic, TopicConfig{Perm: 6}, cluster, brokerName) != "":
				p.skip("offsets", key, "Apache's system topic")
				continue
			case !known:
				p.skip("offsets", key, "topic "+topic+" is not imported from topics.json")
				continue
			}
			for _, q := range slices.Sorted(maps.Keys(table)) {
				off := table[q]
				switch {
				case q < 0 || int(q) >= max(tc.ReadQueueNums, tc.WriteQueueNums):
					p.skip("offsets", fmt.Sprintf("%s queue %d", key, q), fmt.Sprintf("topic %s has %d queues", topic, max(tc.ReadQueueNums, tc.WriteQueueNums)))
				case off < 0:
					p.skip("offsets", fmt.Sprintf("%s queue %d", key, q), fmt.Sprintf("negative offset %d", off))
				default:
					p.Offsets = append(p.Offsets, OffsetStep{Topic: topic, Group: group, QueueID: q, Offset: off})
				}
			}
		}
	}

	if src.DelayOffsets != nil && len(src.DelayOffsets.OffsetTable) > 0 {
		p.skip("delay offsets", fmt.Sprintf("%d levels", len(src.DelayOffsets.OffsetTable)),
			"they point into Apache's SCHEDULE_TOPIC_XXXX, whose messages are not migrated; this broker's timer starts empty")
	}
	return p
}

func (p *Plan) skip(kind, name, reason string) {
	p.Skipped = append(p.Skipped, Skip{Kind: kind, Name: name, Reason: reason})
}

// validName is the characters Apache allows in topic and group names.
var validName = regexp.MustCompile(`^[%|a-zA-Z0-9_-]{1,255}$`)

// Apache's system topics (TopicValidator, TopicConfigManager): what
// each is for.
var systemTopics = map[string]string{
	"TBW102":                      "Apache's template for auto-created topics (this broker uses defaultTopicQueueNums)",
	"SCHEDULE_TOPIC_XXXX":         "Apache's store of delayed messages (this broker has its own timer)",
	"RMQ_SYS_TRANS_HALF_TOPIC":    "Apache's store of transaction half messages",
	"RMQ_SYS_TRANS_OP_HALF_TOPIC": "Apache's store of transaction outcomes",
	"TRANS_CHECK_MAX_TIME_TOPIC":  "Apache's store of given-up transactions",
	"RMQ_SYS_TRACE_TOPIC":         "Apache's trace topic (this broker creates its own, traceTopicEnable)",
	"SELF_TEST_TOPIC":             "Apache's system topic",
	"BenchmarkTest":               "Apache's system topic",
	"OFFSET_MOVED_EVENT":          "Apache's system topic",
	"CHECKPOINT_TOPIC":            "Apache's system topic",
}

// Apache's permission bits (PermName).
const (
	permInherit = 1
	permWrite   = 2
	permRead    = 4
)

// systemTopic says why name is one of Apache's own topics, "" if it is
// not.
func systemTopic(name string, tc TopicConfig, cluster, brokerName string) string {
	if r, ok := systemTopics[name]; ok {
		return r
	}
	switch {
	case strings.HasPrefix(name, "rmq_sys_"):
		return "Apache's system topic"
	case strings.HasPrefix(name, "%RETRY%"), strings.HasPrefix(name, "%DLQ%"):
		return "this broker creates a group's retry and dead-letter topics itself"
	case name == cluster || name == cluster+"_REPLY_TOPIC":
		return "Apache's topic named after its cluster"
	case name == brokerName:
		return "Apache's topic named after its broker"
	case tc.Perm&permInherit != 0:
		return "carries Apache's inherit permission, which only its template, cluster- and broker-name topics have"
	case tc.Perm&(permRead|permWrite) == 0:
		return "neither readable nor writable"
	}
	return ""
}

// badTopic says why a topic cannot be created, "" if it can.
func badTopic(name string, tc TopicConfig) string {
	switch {
	case !validName.MatchString(name) || len(name) > 127:
		return "not a valid topic name (letters, digits, %, |, - and _, at most 127)"
	case tc.ReadQueueNums <= 0 || tc.WriteQueueNums <= 0:
		return fmt.Sprintf("%d read and %d write queues", tc.ReadQueueNums, tc.WriteQueueNums)
	}
	return ""
}

// Apache's system consumer groups (MixAll).
var systemGroups = []string{"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
	"CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "SCHEDULE_CONSUMER", "DEFAULT_CONSUMER", "__MONITOR_CONSUMER"}

// systemGroup says why name is one of Apache's own groups, "" if not.
func systemGroup(name string) string {
	if slices.Contains(systemGroups, name) || strings.HasPrefix(name, "CID_RMQ_SYS_") {
		return "Apache's system group"
	}
	return ""
}

// withGroupDefaults fills what a group's JSON left out with Apache's
// defaults (SubscriptionGroupConfig's initial values).
func withGroupDefaults(gc GroupConfig) GroupConfig {
	t, one, sixteen, fifteen, oneL := true, 1, 16, 15, int64(1)
	for _, f := range []**bool{&gc.ConsumeEnable, &gc.ConsumeFromMinEnable, &gc.ConsumeBroadcastEnable, &gc.NotifyConsumerIdsChangedEnable} {
		if *f == nil {
			*f = &t
		}
	}
	gc.RetryQueueNums = cmp.Or(gc.RetryQueueNums, &one)
	gc.RetryMaxTimes = cmp.Or(gc.RetryMaxTimes, &sixteen)
	gc.ConsumeTimeoutMinute = cmp.Or(gc.ConsumeTimeoutMinute, &fifteen)
	gc.WhichBrokerWhenConsumeSlowly = cmp.Or(gc.WhichBrokerWhenConsumeSlowly, &oneL)
	return gc
}
