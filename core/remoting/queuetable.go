package remoting

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Queue-keyed offset tables: the bodies of RESET_CONSUMER_CLIENT_OFFSET,
// GET_CONSUMER_STATUS_FROM_CLIENT and their admin requests carry maps
// keyed by a MessageQueue object. RocketMQ writes them with fastjson,
// which puts the key object itself where JSON wants a string, so the body
// is not strict JSON:
//
//	{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:5,{"brokerName":"b","queueId":1,"topic":"t"}:7}}
//
// The official Go client parses exactly this form (no spaces, key fields
// in fastjson's alphabetical order), and writes it in its own answers.
// AppendQueueOffsets writes it; ParseQueueOffsets and FastjsonField read
// it, and any spacing.

// QueueKey is a MessageQueue as a map key: its fields in fastjson's order.
type QueueKey struct {
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
	Topic      string `json:"topic"`
}

// QueueOffset is one entry of a queue-keyed offset table.
type QueueOffset struct {
	Queue  QueueKey
	Offset int64
}

// errQueueTable marks a queue-keyed table that cannot be read.
var errQueueTable = errors.New("remoting: malformed queue-keyed table")

// AppendQueueOffsets appends the table, {key:offset,…} in fastjson's
// form, to dst, in the order given.
func AppendQueueOffsets(dst []byte, table []QueueOffset) []byte {
	dst = append(dst, '{')
	for i, e := range table {
		if i > 0 {
			dst = append(dst, ',')
		}
		k, _ := json.Marshal(e.Queue)
		dst = append(dst, k...)
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, e.Offset, 10)
	}
	return append(dst, '}')
}

// ParseQueueOffsets reads a queue-keyed offset table, {key:offset,…},
// with object keys (fastjson) or with each key a JSON string holding the
// object (what strict JSON encoders write).
func ParseQueueOffsets(b []byte) ([]QueueOffset, error) {
	var out []QueueOffset
	err := ParseQueueKeyed(b, func(q QueueKey, v []byte) error {
		off, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil {
			return fmt.Errorf("%w: offset %.40q: %v", errQueueTable, v, err)
		}
		out = append(out, QueueOffset{Queue: q, Offset: off})
		return nil
	})
	return out, err
}

// ParseQueueKeyed reads a map keyed by MessageQueue objects, {key:value,
// …}, in fastjson's form or with string keys as ParseQueueOffsets, and
// calls value with each key and the raw JSON of its value, in the order
// written, stopping at value's first error.
func ParseQueueKeyed(b []byte, value func(q QueueKey, v []byte) error) error {
	b = bytes.TrimSpace(b)
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return fmt.Errorf("%w: not an object", errQueueTable)
	}
	i := skipSpace(b, 1)
	if b[i] == '}' {
		if i != len(b)-1 {
			return fmt.Errorf("%w: data after the table", errQueueTable)
		}
		return nil
	}
	for {
		end, err := skipValue(b, i)
		if err != nil {
			return err
		}
		key := b[i:end]
		if key[0] == '"' {
			var s string
			if err := json.Unmarshal(key, &s); err != nil {
				return fmt.Errorf("%w: key %.40q: %v", errQueueTable, key, err)
			}
			key = []byte(s)
		}
		var q QueueKey
		if err := json.Unmarshal(key, &q); err != nil {
			return fmt.Errorf("%w: key %.40q: %v", errQueueTable, key, err)
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return fmt.Errorf("%w: no ':' after key at byte %d", errQueueTable, i)
		}
		i = skipSpace(b, i+1)
		if end, err = skipValue(b, i); err != nil {
			return err
		}
		if err := value(q, b[i:end]); err != nil {
			return err
		}
		i = skipSpace(b, end)
		if i >= len(b) {
			return fmt.Errorf("%w: unterminated", errQueueTable)
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			if i != len(b)-1 {
				return fmt.Errorf("%w: data after the table", errQueueTable)
			}
			return nil
		default:
			return fmt.Errorf("%w: %q at byte %d", errQueueTable, b[i], i)
		}
	}
}

// FastjsonField returns the raw value of a top-level field of a fastjson
// object (one whose maps may have object keys), nil if it has none.
func FastjsonField(body []byte, name string) ([]byte, error) {
	b := bytes.TrimSpace(body)
	if len(b) < 2 || b[0] != '{' {
		return nil, fmt.Errorf("%w: not an object", errQueueTable)
	}
	i := skipSpace(b, 1)
	for i < len(b) && b[i] != '}' {
		end, err := skipValue(b, i)
		if err != nil {
			return nil, err
		}
		key := b[i:end]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return nil, fmt.Errorf("%w: no ':' after key at byte %d", errQueueTable, i)
		}
		i = skipSpace(b, i+1)
		if end, err = skipValue(b, i); err != nil {
			return nil, err
		}
		var k string
		if key[0] == '"' && json.Unmarshal(key, &k) == nil && k == name {
			return b[i:end], nil
		}
		i = skipSpace(b, end)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return nil, nil
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the end of the value starting at b[i]: a string, an
// object or array (balanced, strings respected), or a bare token.
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, fmt.Errorf("%w: value expected at byte %d", errQueueTable, i)
	}
	depth := 0
	for j := i; j < len(b); j++ {
		switch c := b[j]; c {
		case '"':
			for j++; j < len(b) && b[j] != '"'; j++ {
				if b[j] == '\\' {
					j++
				}
			}
			if j >= len(b) {
				return 0, fmt.Errorf("%w: unterminated string", errQueueTable)
			}
			if depth == 0 {
				return j + 1, nil
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				if j == i {
					return 0, fmt.Errorf("%w: value expected at byte %d", errQueueTable, i)
				}
				return j, nil
			}
			depth--
			if depth == 0 {
				return j + 1, nil
			}
		case ',', ':', ' ', '\t', '\n', '\r':
			if depth == 0 {
				if j == i {
					return 0, fmt.Errorf("%w: value expected at byte %d", errQueueTable, i)
				}
				return j, nil
			}
		}
	}
	if depth != 0 {
		return 0, fmt.Errorf("%w: unbalanced", errQueueTable)
	}
	return len(b), nil
}
