package remoting

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Official clients do not agree on the JSON types of some body fields, and
// a broker must take what each of them sends (see doc.go, "Client
// bodies"). The body types keep plain Go field types for the code that
// reads them; their UnmarshalJSON methods, here, decode through the
// lenient scalars below and copy the result:
//
//	+-------------------------------+-----------------+-------------------+
//	| field                         | Go type         | also accepted     |
//	+-------------------------------+-----------------+-------------------+
//	| SubscriptionData.codeSet      | []string        | numbers, booleans |
//	|                               |                 | as their text     |
//	| SubscriptionData.subVersion   | int64           | decimal string    |
//	| SubscriptionData.tagsSet      | []string        | numbers, booleans |
//	| classFilterMode, unitMode,    | bool            | "true"/"false",   |
//	| onlyThisBroker                |                 | 0/1, "0"/"1"      |
//	| ConsumerData.messageModel     | string          | any letter case,  |
//	|                               |                 | made CLUSTERING / |
//	|                               |                 | BROADCASTING      |
//	| ConsumerData.messageModel,    | string          | the enum's        |
//	| consumeType, consumeFromWhere |                 | ordinal (C++),    |
//	|                               |                 | made its name     |
//	+-------------------------------+-----------------+-------------------+
//
// Everywhere, null leaves a field as it was and unknown keys are skipped,
// as encoding/json does. Anything else of the wrong type is an error that
// names the field and what came.

// lenientBool is a bool that also takes a string or a 0/1 number.
type lenientBool bool

// scalarText is a JSON scalar as text: a string's contents, or a number's
// or a literal's own text; null reports null.
func scalarText(data []byte) (s string, null bool, err error) {
	s = string(bytes.TrimSpace(data))
	if s == "null" {
		return "", true, nil
	}
	if len(s) >= 2 && s[0] == '"' {
		err = json.Unmarshal(data, &s)
	}
	return s, false, err
}

func (b *lenientBool) UnmarshalJSON(data []byte) error {
	s, null, err := scalarText(data)
	if null || err != nil {
		return err
	}
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("%s is not a boolean", truncated(data))
	}
	*b = lenientBool(v)
	return nil
}

// lenientInt64 is an int64 that also takes its decimal text as a string;
// an empty string is 0.
type lenientInt64 int64

func (n *lenientInt64) UnmarshalJSON(data []byte) error {
	s, null, err := scalarText(data)
	if null || err != nil {
		return err
	}
	if s == "" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%s is not an int64", truncated(data))
	}
	*n = lenientInt64(v)
	return nil
}

// lenientStrings is a list of strings that also takes numbers and
// booleans as items, kept as their JSON text; null items are skipped.
type lenientStrings []string

func (l *lenientStrings) UnmarshalJSON(data []byte) error {
	if string(bytes.TrimSpace(data)) == "null" {
		return nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil {
		return fmt.Errorf("%s is not a list", truncated(data))
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		it = bytes.TrimSpace(it)
		switch {
		case len(it) == 0 || string(it) == "null":
		case it[0] == '"':
			var s string
			if err := json.Unmarshal(it, &s); err != nil {
				return err
			}
			out = append(out, s)
		case it[0] == '{' || it[0] == '[':
			return fmt.Errorf("list item %s is not a string or number", truncated(it))
		default: // a number, true or false: json.Unmarshal has checked it
			out = append(out, string(it))
		}
	}
	*l = out
	return nil
}

// truncated quotes at most 40 bytes of a JSON value for an error.
func truncated(data []byte) string {
	if len(data) > 40 {
		return strconv.Quote(string(data[:40])) + "…"
	}
	return strconv.Quote(string(data))
}

// UnmarshalJSON reads a SubscriptionData as any official client writes it
// (see the table above).
func (s *SubscriptionData) UnmarshalJSON(data []byte) error {
	w := struct {
		ClassFilterMode lenientBool    `json:"classFilterMode"`
		Topic           string         `json:"topic"`
		SubString       string         `json:"subString"`
		TagsSet         lenientStrings `json:"tagsSet"`
		CodeSet         lenientStrings `json:"codeSet"`
		SubVersion      lenientInt64   `json:"subVersion"`
		ExpressionType  string         `json:"expressionType"`
	}{lenientBool(s.ClassFilterMode), s.Topic, s.SubString, s.TagsSet, s.CodeSet, lenientInt64(s.SubVersion), s.ExpressionType}
	if err := json.Unmarshal(data, &w); err != nil {
		return fmt.Errorf("subscription: %w", err)
	}
	*s = SubscriptionData{ClassFilterMode: bool(w.ClassFilterMode), Topic: w.Topic, SubString: w.SubString,
		TagsSet: w.TagsSet, CodeSet: w.CodeSet, SubVersion: int64(w.SubVersion), ExpressionType: w.ExpressionType}
	return nil
}

// UnmarshalJSON reads a ConsumerData as any official client writes it
// (see the table above).
func (c *ConsumerData) UnmarshalJSON(data []byte) error {
	w := struct {
		GroupName           string             `json:"groupName"`
		ConsumeType         lenientEnum        `json:"consumeType"`
		MessageModel        lenientEnum        `json:"messageModel"`
		ConsumeFromWhere    lenientEnum        `json:"consumeFromWhere"`
		SubscriptionDataSet []SubscriptionData `json:"subscriptionDataSet"`
		UnitMode            lenientBool        `json:"unitMode"`
	}{GroupName: c.GroupName, SubscriptionDataSet: c.SubscriptionDataSet, UnitMode: lenientBool(c.UnitMode),
		ConsumeType:      lenientEnum{text: c.ConsumeType, names: consumeTypes},
		MessageModel:     lenientEnum{text: c.MessageModel, names: messageModels},
		ConsumeFromWhere: lenientEnum{text: c.ConsumeFromWhere, names: consumeFromWheres}}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*c = ConsumerData{GroupName: w.GroupName, ConsumeType: w.ConsumeType.text, MessageModel: canonicalModel(w.MessageModel.text),
		ConsumeFromWhere: w.ConsumeFromWhere.text, SubscriptionDataSet: w.SubscriptionDataSet, UnitMode: bool(w.UnitMode)}
	return nil
}

// The names of Java's enums a heartbeat names, by ordinal: the C++ client
// writes its enums (in the same order) as their numbers.
var (
	consumeTypes      = []string{"CONSUME_ACTIVELY", "CONSUME_PASSIVELY"}
	messageModels     = []string{"BROADCASTING", "CLUSTERING"}
	consumeFromWheres = []string{"CONSUME_FROM_LAST_OFFSET", "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
		"CONSUME_FROM_MIN_OFFSET", "CONSUME_FROM_MAX_OFFSET", "CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_TIMESTAMP"}
)

// lenientEnum is a Java enum as its name, or as its ordinal in names.
type lenientEnum struct {
	text  string
	names []string
}

func (e *lenientEnum) UnmarshalJSON(data []byte) error {
	s, null, err := scalarText(data)
	if null || err != nil {
		return err
	}
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] != '"' {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n >= len(e.names) {
			return fmt.Errorf("%s is not one of %s or its number", truncated(data), strings.Join(e.names, ", "))
		}
		s = e.names[n]
	}
	e.text = s
	return nil
}

// canonicalModel spells a message model as Java's enum does: the Go
// client writes "Clustering" and "BroadCasting".
func canonicalModel(m string) string {
	for _, name := range [...]string{"CLUSTERING", "BROADCASTING"} {
		if strings.EqualFold(m, name) {
			return name
		}
	}
	return m
}

// UnmarshalJSON reads a lock batch as any official client writes it (see
// the table above).
func (b *LockBatchBody[Q]) UnmarshalJSON(data []byte) error {
	w := struct {
		ConsumerGroup  string      `json:"consumerGroup"`
		ClientID       string      `json:"clientId"`
		OnlyThisBroker lenientBool `json:"onlyThisBroker"`
		MQSet          []Q         `json:"mqSet"`
	}{b.ConsumerGroup, b.ClientID, lenientBool(b.OnlyThisBroker), b.MQSet}
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*b = LockBatchBody[Q]{ConsumerGroup: w.ConsumerGroup, ClientID: w.ClientID, OnlyThisBroker: bool(w.OnlyThisBroker), MQSet: w.MQSet}
	return nil
}
