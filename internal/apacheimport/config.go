package apacheimport

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is broker.conf mapped onto this broker's config file.
type Config struct {
	Mapped []Mapped
	// Unmapped are the keys left out, each with why.
	Unmapped []Skip
	// Attention are mapped keys that need a look before the broker
	// starts with them.
	Attention []string
}

// Mapped is one broker.conf key carried into the YAML.
type Mapped struct {
	Key, Value string // Apache's
	To         string // this broker's key, dotted for a section's
	ToValue    any    // its value: string, int, int64, float64, bool or []string
	Note       string // what differs, when something does
}

// mapping maps one broker.conf value; it returns the key and value of
// this broker's config, a note, or an error for a value Apache would
// not accept either.
type mapping func(v string, all map[string]string) (to string, val any, note string, err error)

func toKey(key string, conv func(string) (any, error), note string) mapping {
	return func(v string, _ map[string]string) (string, any, string, error) {
		val, err := conv(v)
		return key, val, note, err
	}
}

func asString(v string) (any, error) { return v, nil }

func asInt(v string) (any, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return nil, fmt.Errorf("%q is not an integer", v)
	}
	return n, nil
}

// asBool is Java's Boolean.parseBoolean: "true" in any case, else false.
func asBool(v string) (any, error) { return strings.EqualFold(v, "true"), nil }

// asDuration converts a count of unit to a duration string.
func asDuration(unit time.Duration) func(string) (any, error) {
	return func(v string) (any, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a count of %s", v, strings.TrimPrefix(unit.String(), "1"))
		}
		return shortDuration(time.Duration(n) * unit), nil
	}
}

// shortDuration writes d in its largest whole unit: 48h, not 48h0m0s.
func shortDuration(d time.Duration) string {
	for _, u := range []struct {
		name string
		d    time.Duration
	}{{"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}} {
		if d >= u.d && d%u.d == 0 {
			return fmt.Sprintf("%d%s", d/u.d, u.name)
		}
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// asSize writes a byte count in the largest unit it is a whole number of.
func asSize(v string) (any, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return nil, fmt.Errorf("%q is not a byte count", v)
	}
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.size == 0 {
			return fmt.Sprintf("%d%s", n/u.size, u.name), nil
		}
	}
	return strconv.FormatInt(n, 10), nil
}

// brokerConfKeys are the broker.conf keys (Apache's BrokerConfig,
// MessageStoreConfig and NettyServerConfig) with an equivalent here.
var brokerConfKeys = map[string]mapping{
	"brokerClusterName": toKey("clusterName", asString, ""),
	"brokerName":        toKey("brokerName", asString, ""),
	"listenPort": func(v string, _ map[string]string) (string, any, string, error) {
		port, err := strconv.Atoi(v)
		if err != nil || port <= 0 || port > 65535 {
			return "", nil, "", fmt.Errorf("%q is not a port", v)
		}
		return "listen", net.JoinHostPort("0.0.0.0", v), "every interface, as Apache listens", nil
	},
	"brokerIP1": func(v string, all map[string]string) (string, any, string, error) {
		port := all["listenPort"]
		if port == "" {
			port = "10911"
		}
		if net.ParseIP(v) == nil {
			return "", nil, "", fmt.Errorf("%q is not an IP address", v)
		}
		return "advertise", net.JoinHostPort(v, port), "the address clients are told, with listenPort", nil
	},
	"namesrvAddr": func(v string, _ map[string]string) (string, any, string, error) {
		var addrs []string
		for _, a := range strings.Split(v, ";") {
			if a = strings.TrimSpace(a); a != "" {
				if _, _, err := net.SplitHostPort(a); err != nil {
					return "", nil, "", fmt.Errorf("%q is not host:port", a)
				}
				addrs = append(addrs, a)
			}
		}
		return "namesrv", addrs, "registers there too; the embedded name server still runs unless namesrvListen is empty", nil
	},
	"flushDiskType": func(v string, _ map[string]string) (string, any, string, error) {
		switch v {
		case "SYNC_FLUSH":
			return "store.flush", "sync", "", nil
		case "ASYNC_FLUSH":
			return "store.flush", "async", "", nil
		}
		return "", nil, "", fmt.Errorf("%q is not SYNC_FLUSH or ASYNC_FLUSH", v)
	},
	"flushIntervalCommitLog":      toKey("store.flushInterval", asDuration(time.Millisecond), ""),
	"mappedFileSizeCommitLog":     toKey("store.segmentSize", asSize, "fixed for the life of this broker's data directory"),
	"fileReservedTime":            toKey("store.retention", asDuration(time.Hour), "counted from a segment's last write, checked every store.retentionInterval"),
	"messageIndexEnable":          toKey("store.messageIndexEnable", asBool, ""),
	"maxMessageSize":              toKey("maxMessageSize", asSize, ""),
	"autoCreateTopicEnable":       toKey("autoCreateTopic", asBool, ""),
	"autoCreateSubscriptionGroup": toKey("autoCreateSubscriptionGroup", asBool, ""),
	"defaultTopicQueueNums":       toKey("defaultTopicQueueNums", asInt, ""),
	"messageDelayLevel":           toKey("delayLevels", asString, ""),
	"traceTopicEnable":            toKey("traceTopicEnable", asBool, ""),
	"enablePropertyFilter":        toKey("enablePropertyFilter", asBool, ""),
	"transactionTimeOut":          toKey("txnTimeout", asDuration(time.Millisecond), ""),
	"transactionCheckInterval":    toKey("txnCheckInterval", asDuration(time.Millisecond), ""),
	"transactionCheckMax":         toKey("txnCheckMax", asInt, ""),
	"registerNameServerPeriod":    toKey("registerInterval", asDuration(time.Millisecond), ""),
	"timerMaxDelaySec":            toKey("maxTimerDelay", asDuration(time.Second), ""),
	"aclEnable":                   toKey("acl.enabled", asBool, "copy the accounts of Apache's plain_acl.yml under acl.accounts (the same format)"),
	"diskMaxUsedSpaceRatio": func(v string, _ map[string]string) (string, any, string, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 100 {
			return "", nil, "", fmt.Errorf("%q is not a percentage", v)
		}
		return "store.diskHighWater", float64(n) / 100, "a fraction here, not a percentage", nil
	},
	"notifyConsumerIdsChangedEnable": func(v string, _ map[string]string) (string, any, string, error) {
		return "disableNotifyConsumerIDsChanged", !strings.EqualFold(v, "true"), "inverted", nil
	},
}

// brokerConfWhy says why a key Apache operators often set is not mapped.
var brokerConfWhy = map[string]string{
	"brokerId":              "one broker here; replicas are members of a raft set (cluster:, docs/replication.md)",
	"brokerRole":            "one broker here; replicas are members of a raft set (cluster:, docs/replication.md)",
	"haListenPort":          "replication is raft's (cluster.peers)",
	"storePathRootDir":      "this broker's store has its own format: give dataDir a new, empty directory",
	"storePathCommitLog":    "this broker's store has its own format: give dataDir a new, empty directory",
	"deleteWhen":            "retention runs every store.retentionInterval, not at an hour of the day",
	"enableDLegerCommitLog": "replication is raft's (cluster:)",
}

// MapBrokerConf maps broker.conf's entries onto this broker's config.
// brokerRole SLAVE and a brokerId other than 0 are noted for attention:
// such a broker is a replica, which here is a member of a raft set.
func MapBrokerConf(props []Property) Config {
	var c Config
	all := map[string]string{}
	for _, kv := range props {
		all[kv.Key] = strings.TrimSpace(kv.Value)
	}
	for _, kv := range props {
		v := all[kv.Key]
		m, ok := brokerConfKeys[kv.Key]
		if !ok {
			why := brokerConfWhy[kv.Key]
			if why == "" {
				why = "no equivalent in this broker"
			}
			c.Unmapped = append(c.Unmapped, Skip{Kind: "broker.conf", Name: kv.Key + "=" + v, Reason: why})
			continue
		}
		to, val, note, err := m(v, all)
		if err != nil {
			c.Unmapped = append(c.Unmapped, Skip{Kind: "broker.conf", Name: kv.Key + "=" + v, Reason: fmt.Sprintf("line %d: %v", kv.Line, err)})
			continue
		}
		c.Mapped = append(c.Mapped, Mapped{Key: kv.Key, Value: v, To: to, ToValue: val, Note: note})
	}
	if r := all["brokerRole"]; r == "SLAVE" || (all["brokerId"] != "" && all["brokerId"] != "0") {
		c.Attention = append(c.Attention, "this broker.conf is a slave's: import the master's, and make replicas members of a raft set (docs/replication.md)")
	}
	if listen := c.value("listen"); listen != nil && !strings.EqualFold(all["aclEnable"], "true") {
		c.Attention = append(c.Attention, "listen is 0.0.0.0 with acl off: the broker refuses to start so unless acl is enabled, listen names a loopback address, or insecure: true")
	}
	return c
}

// value returns the value mapped to key to, nil if none is.
func (c Config) value(to string) any {
	for _, m := range c.Mapped {
		if m.To == to {
			return m.ToValue
		}
	}
	return nil
}

// YAML writes the mapped keys as this broker's config file, with a
// comment naming where each came from. source names the broker.conf.
func (c Config) YAML(source string) ([]byte, error) {
	root := &yaml.Node{Kind: yaml.MappingNode}
	for _, m := range c.Mapped {
		parent := root
		path := strings.Split(m.To, ".")
		for _, section := range path[:len(path)-1] {
			parent = child(parent, section)
		}
		var val yaml.Node
		if err := val.Encode(m.ToValue); err != nil {
			return nil, fmt.Errorf("%s: %w", m.To, err)
		}
		if list, ok := m.ToValue.([]string); ok && len(list) > 0 {
			val.Style = yaml.FlowStyle
		}
		key := &yaml.Node{Kind: yaml.ScalarNode, Value: path[len(path)-1], HeadComment: "from " + m.Key + "=" + m.Value}
		parent.Content = append(parent.Content, key, &val)
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# This broker's config, mapped from Apache RocketMQ's %s by \"broker import\".\n", source)
	fmt.Fprintf(&buf, "# Keys without an equivalent are listed in the import's report. Check it with:\n#   broker config check FILE\n")
	if len(root.Content) == 0 {
		buf.WriteString("{}\n")
		return buf.Bytes(), nil
	}
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(root); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// child returns the mapping under key in m, adding it if missing.
func child(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	c := &yaml.Node{Kind: yaml.MappingNode}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, c)
	return c
}
