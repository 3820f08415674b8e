package client

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/rmq-go/rmq/core/remoting"
)

// The JSON bodies exchanged with name servers and brokers are
// core/remoting's; this file holds what only the client needs to read them.

// decodeRouteData reads a route body. Java name servers write brokerAddrs
// with bare integer keys ({0:"host:port"}), which is not JSON; such keys
// are quoted first.
func decodeRouteData(body []byte) (*remoting.TopicRouteData, error) {
	var rd remoting.TopicRouteData
	if err := json.Unmarshal(body, &rd); err == nil {
		return &rd, nil
	}
	if err := json.Unmarshal(quoteIntKeys(body), &rd); err != nil {
		return nil, err
	}
	return &rd, nil
}

// quoteIntKeys quotes every bare integer that stands where an object key
// belongs: after '{' or ',' (outside strings) and before ':'.
func quoteIntKeys(b []byte) []byte {
	out := make([]byte, 0, len(b)+16)
	inStr, esc := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			out = append(out, c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		if c == '"' {
			inStr = true
			out = append(out, c)
			continue
		}
		out = append(out, c)
		if c != '{' && c != ',' {
			continue
		}
		j := i + 1
		for j < len(b) && (b[j] == ' ' || b[j] == '\n' || b[j] == '\t' || b[j] == '\r') {
			j++
		}
		k := j
		if k < len(b) && b[k] == '-' {
			k++
		}
		for k < len(b) && b[k] >= '0' && b[k] <= '9' {
			k++
		}
		if k > j && k < len(b) && (b[k] == ':' || b[k] == ' ') {
			out = append(out, '"')
			out = append(out, b[j:k]...)
			out = append(out, '"')
			i = k - 1
		}
	}
	return out
}

// itoa64 formats an int64 for a header.
func itoa64(v int64) string { return strconv.FormatInt(v, 10) }

// trimJSON reports whether a body holds nothing but whitespace.
func emptyBody(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }
