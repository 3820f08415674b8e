package apacheimport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Errors of the decoders. Each is wrapped with the file and what was
// wrong; compare with errors.Is.
var (
	// ErrSyntax marks a file that is not the JSON (as fastjson writes it)
	// or the properties text it should be.
	ErrSyntax = errors.New("apacheimport: syntax error")
	// ErrNoInput is returned by ReadDir for a directory holding none of
	// the files it reads.
	ErrNoInput = errors.New("apacheimport: no Apache RocketMQ config files")
)

// DataVersion is the version stamp Apache writes beside each table.
type DataVersion struct {
	StateVersion int64 `json:"stateVersion"`
	Timestamp    int64 `json:"timestamp"` // ms
	Counter      int64 `json:"counter"`
}

// TopicConfig is one entry of topics.json's topicConfigTable (Apache's
// common.TopicConfig).
type TopicConfig struct {
	TopicName       string            `json:"topicName"`
	ReadQueueNums   int               `json:"readQueueNums"`
	WriteQueueNums  int               `json:"writeQueueNums"`
	Perm            int               `json:"perm"`            // 4 read, 2 write, 1 inherit
	TopicFilterType string            `json:"topicFilterType"` // SINGLE_TAG or MULTI_TAG
	TopicSysFlag    int               `json:"topicSysFlag"`
	Order           bool              `json:"order"`
	Attributes      map[string]string `json:"attributes"` // "message.type": "FIFO", ...
}

// Topics is topics.json (Apache's TopicConfigSerializeWrapper).
type Topics struct {
	TopicConfigTable map[string]TopicConfig `json:"topicConfigTable"`
	DataVersion      DataVersion            `json:"dataVersion"`
}

// RetryPolicy is a group's groupRetryPolicy (Apache 5's GroupRetryPolicy).
type RetryPolicy struct {
	Type                   string `json:"type"` // CUSTOMIZED or EXPONENTIAL
	ExponentialRetryPolicy *struct {
		Initial    int64 `json:"initial"` // ms
		Max        int64 `json:"max"`     // ms
		Multiplier int64 `json:"multiplier"`
	} `json:"exponentialRetryPolicy,omitempty"`
	CustomizedRetryPolicy *struct {
		Next []int64 `json:"next"` // ms before each retry
	} `json:"customizedRetryPolicy,omitempty"`
}

// GroupConfig is one entry of subscriptionGroup.json's
// subscriptionGroupTable (Apache's SubscriptionGroupConfig). Booleans
// are pointers: a field the file leaves out takes Apache's default, not
// false.
type GroupConfig struct {
	GroupName                      string            `json:"groupName"`
	ConsumeEnable                  *bool             `json:"consumeEnable"`
	ConsumeFromMinEnable           *bool             `json:"consumeFromMinEnable"`
	ConsumeBroadcastEnable         *bool             `json:"consumeBroadcastEnable"`
	ConsumeMessageOrderly          bool              `json:"consumeMessageOrderly"`
	RetryQueueNums                 *int              `json:"retryQueueNums"`
	RetryMaxTimes                  *int              `json:"retryMaxTimes"`
	GroupRetryPolicy               *RetryPolicy      `json:"groupRetryPolicy"`
	BrokerID                       int64             `json:"brokerId"`
	WhichBrokerWhenConsumeSlowly   *int64            `json:"whichBrokerWhenConsumeSlowly"`
	NotifyConsumerIdsChangedEnable *bool             `json:"notifyConsumerIdsChangedEnable"`
	GroupSysFlag                   int               `json:"groupSysFlag"`
	ConsumeTimeoutMinute           *int              `json:"consumeTimeoutMinute"`
	Attributes                     map[string]string `json:"attributes"`
}

// Groups is subscriptionGroup.json (Apache's SubscriptionGroupWrapper,
// written by SubscriptionGroupManager).
type Groups struct {
	SubscriptionGroupTable map[string]GroupConfig `json:"subscriptionGroupTable"`
	// ForbiddenTable is group → topic → forbidden bits; reported, not
	// imported.
	ForbiddenTable map[string]map[string]int `json:"forbiddenTable"`
	DataVersion    DataVersion               `json:"dataVersion"`
}

// Offsets is consumerOffset.json (Apache's ConsumerOffsetManager):
// "topic@group" → queue id → the next offset to consume.
type Offsets struct {
	OffsetTable map[string]map[int32]int64 `json:"offsetTable"`
	DataVersion DataVersion                `json:"dataVersion"`
}

// DelayOffsets is delayOffset.json (Apache's DelayOffsetSerializeWrapper,
// written by ScheduleMessageService): delay level → the offset reached
// in that level's queue of SCHEDULE_TOPIC_XXXX.
type DelayOffsets struct {
	OffsetTable map[int]int64 `json:"offsetTable"`
	DataVersion DataVersion   `json:"dataVersion"`
}

// DecodeTopics reads topics.json.
func DecodeTopics(b []byte) (*Topics, error) {
	var v Topics
	if err := decodeFastjson(b, &v); err != nil {
		return nil, err
	}
	for name, tc := range v.TopicConfigTable {
		if tc.TopicName == "" {
			tc.TopicName = name
			v.TopicConfigTable[name] = tc
		}
	}
	return &v, nil
}

// DecodeGroups reads subscriptionGroup.json.
func DecodeGroups(b []byte) (*Groups, error) {
	var v Groups
	if err := decodeFastjson(b, &v); err != nil {
		return nil, err
	}
	for name, gc := range v.SubscriptionGroupTable {
		if gc.GroupName == "" {
			gc.GroupName = name
			v.SubscriptionGroupTable[name] = gc
		}
	}
	return &v, nil
}

// DecodeOffsets reads consumerOffset.json.
func DecodeOffsets(b []byte) (*Offsets, error) {
	var v Offsets
	if err := decodeFastjson(b, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// DecodeDelayOffsets reads delayOffset.json.
func DecodeDelayOffsets(b []byte) (*DelayOffsets, error) {
	var v DelayOffsets
	if err := decodeFastjson(b, &v); err != nil {
		return nil, err
	}
	return &v, nil
}

// decodeFastjson decodes JSON as Apache's fastjson writes it: map keys
// that are numbers (the queue ids of consumerOffset.json, the levels of
// delayOffset.json) are written bare, {0:250,1:250}, which is not JSON.
// Such keys are quoted first; nothing else is relaxed.
func decodeFastjson(b []byte, v any) error {
	q, err := quoteBareKeys(b)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(q, v); err != nil {
		return fmt.Errorf("%w: %v", ErrSyntax, err)
	}
	return nil
}

// quoteBareKeys returns b with every object key that is written without
// quotes (a run of letters, digits, '-', '+', '.' or '_') put in quotes.
// Strings are copied as they are; the result is for encoding/json, which
// checks everything else.
func quoteBareKeys(b []byte) ([]byte, error) {
	b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // a byte-order mark
	var out []byte
	var stack []byte // '{' or '['
	expectKey := false
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == '"':
			j := i + 1
			for ; j < len(b); j++ {
				if b[j] == '\\' {
					j++
					continue
				}
				if b[j] == '"' {
					break
				}
			}
			if j >= len(b) {
				return nil, fmt.Errorf("%w: a string is not closed", ErrSyntax)
			}
			out = append(out, b[i:j+1]...)
			i = j + 1
			expectKey = false
			continue
		case c == '{' || c == '[':
			stack = append(stack, c)
			expectKey = c == '{'
		case c == '}' || c == ']':
			if len(stack) > 0 {
				stack = stack[:len(stack)-1]
			}
			expectKey = false
		case c == ',':
			expectKey = len(stack) > 0 && stack[len(stack)-1] == '{'
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		case expectKey && isBareKeyByte(c):
			j := i
			for j < len(b) && isBareKeyByte(b[j]) {
				j++
			}
			out = append(out, '"')
			out = append(out, b[i:j]...)
			out = append(out, '"')
			i = j
			expectKey = false
			continue
		default:
			expectKey = false
		}
		out = append(out, c)
		i++
	}
	return out, nil
}

func isBareKeyByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '+' || c == '.' || c == '_'
}

// Property is one key and value of a properties file, with its line.
type Property struct {
	Key, Value string
	Line       int // 1-based line where the entry starts
}

// DecodeProperties reads a Java properties file as java.util.Properties
// does (Apache's broker.conf): '#' and '!' comment lines; "key=value",
// "key:value" or "key value"; a line ending in an odd number of
// backslashes continues on the next; \t \n \r \f and \uXXXX escapes. A
// file that is not UTF-8 is read as ISO-8859-1, Java's default. A
// key given twice keeps its last value, as Properties does; the entries
// come back in the order of their last appearance.
func DecodeProperties(b []byte) ([]Property, error) {
	text := string(b)
	if !utf8.Valid(b) {
		// Properties.load(InputStream) reads ISO-8859-1.
		runes := make([]rune, len(b))
		for i, c := range b {
			runes[i] = rune(c)
		}
		text = string(runes)
	}
	lines := strings.Split(strings.TrimPrefix(text, "\ufeff"), "\n")
	var props []Property
	for n := 0; n < len(lines); n++ {
		start := n + 1
		line := strings.TrimLeft(strings.TrimSuffix(lines[n], "\r"), " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		for endsContinued(line) && n+1 < len(lines) {
			n++
			line = line[:len(line)-1] + strings.TrimLeft(strings.TrimSuffix(lines[n], "\r"), " \t\f")
		}
		if endsContinued(line) {
			line = line[:len(line)-1]
		}
		rawKey, rawValue := splitProperty(line)
		key, err := unescapeProperty(rawKey)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrSyntax, start, err)
		}
		value, err := unescapeProperty(rawValue)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d: %v", ErrSyntax, start, err)
		}
		props = append(props, Property{Key: key, Value: value, Line: start})
	}
	return lastOfEach(props), nil
}

// lastOfEach keeps the last entry of each key, in the order of those
// entries.
func lastOfEach(props []Property) []Property {
	seen := map[string]bool{}
	var out []Property
	for i := len(props) - 1; i >= 0; i-- {
		if !seen[props[i].Key] {
			seen[props[i].Key] = true
			out = append(out, props[i])
		}
	}
	slices.Reverse(out)
	return out
}

// endsContinued reports whether a line ends in an odd number of
// backslashes.
func endsContinued(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty splits a logical line at the first unescaped '=', ':' or
// white space; the separator and the white space around it go.
func splitProperty(line string) (key, value string) {
	i := 0
	for ; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
	}
	if i > len(line) {
		i = len(line)
	}
	key, rest := line[:i], line[i:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	return key, rest
}

// unescapeProperty resolves the escapes of a key or value.
func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			sb.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			sb.WriteByte('\t')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 'f':
			sb.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf(`malformed \u escape`)
			}
			r, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf(`malformed \u escape %q`, s[i-1:i+5])
			}
			sb.WriteRune(rune(r))
			i += 4
		default:
			sb.WriteByte(s[i])
		}
	}
	return sb.String(), nil
}
