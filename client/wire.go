package client

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The JSON bodies exchanged with name servers and brokers. Field names are
// RocketMQ's.

// routeData is the body of a GET_ROUTEINFO_BY_TOPIC answer.
type routeData struct {
	OrderTopicConf string       `json:"orderTopicConf"`
	QueueDatas     []queueData  `json:"queueDatas"`
	BrokerDatas    []brokerData `json:"brokerDatas"`
}

// queueData is one broker's share of a topic.
type queueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"`
	TopicSysFlag   int    `json:"topicSysFlag"`
}

// brokerData is a broker set: its addresses by broker id (0 is the master).
type brokerData struct {
	Cluster     string           `json:"cluster"`
	BrokerName  string           `json:"brokerName"`
	BrokerAddrs map[int64]string `json:"brokerAddrs"`
}

// Topic permission bits.
const (
	permRead  = 4
	permWrite = 2
)

// decodeRouteData reads a route body. Java name servers write brokerAddrs
// with bare integer keys ({0:"host:port"}), which is not JSON; such keys
// are quoted first.
func decodeRouteData(body []byte) (*routeData, error) {
	var rd routeData
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

// heartbeatData is the body of HEART_BEAT.
type heartbeatData struct {
	ClientID        string         `json:"clientID"`
	ProducerDataSet []producerData `json:"producerDataSet"`
	ConsumerDataSet []consumerData `json:"consumerDataSet"`
}

type producerData struct {
	GroupName string `json:"groupName"`
}

// consumerData is one consumer group of a heartbeat.
type consumerData struct {
	GroupName           string             `json:"groupName"`
	ConsumeType         string             `json:"consumeType"`  // CONSUME_PASSIVELY (push) or CONSUME_ACTIVELY (pull)
	MessageModel        string             `json:"messageModel"` // CLUSTERING or BROADCASTING
	ConsumeFromWhere    string             `json:"consumeFromWhere"`
	SubscriptionDataSet []subscriptionData `json:"subscriptionDataSet"`
	UnitMode            bool               `json:"unitMode"`
}

// subscriptionData is one topic subscription of a consumer group.
type subscriptionData struct {
	ClassFilterMode bool     `json:"classFilterMode"`
	Topic           string   `json:"topic"`
	SubString       string   `json:"subString"`
	TagsSet         []string `json:"tagsSet"`
	CodeSet         []string `json:"codeSet"`
	SubVersion      int64    `json:"subVersion"`
	ExpressionType  string   `json:"expressionType"`
}

// consumerListBody is the body of a GET_CONSUMER_LIST_BY_GROUP answer.
type consumerListBody struct {
	ConsumerIDList []string `json:"consumerIdList"`
}

// lockBatchBody is the body of LOCK_BATCH_MQ and UNLOCK_BATCH_MQ.
type lockBatchBody struct {
	ConsumerGroup  string         `json:"consumerGroup"`
	ClientID       string         `json:"clientId"`
	OnlyThisBroker bool           `json:"onlyThisBroker"`
	MqSet          []MessageQueue `json:"mqSet"`
}

// lockBatchResult is the body of a LOCK_BATCH_MQ answer.
type lockBatchResult struct {
	LockOKMQSet []MessageQueue `json:"lockOKMQSet"`
}

// itoa64 formats an int64 for a header.
func itoa64(v int64) string { return strconv.FormatInt(v, 10) }

// trimJSON reports whether a body holds nothing but whitespace.
func emptyBody(b []byte) bool { return len(bytes.TrimSpace(b)) == 0 }
