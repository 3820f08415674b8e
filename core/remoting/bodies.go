package remoting

import (
	"errors"
	"fmt"

	"github.com/rmq-go/rmq/core/message"
)

// The JSON bodies that brokers, name servers and clients exchange, and the
// topic constants they carry. Field names are RocketMQ's; each type names
// the request codes whose body it is. They live here so that the broker,
// the name server and the client share one declaration of each.

// Permission bits of a topic (TopicConfig.Perm, QueueData.Perm).
const (
	PermPriority = 8 // the topic's queues are ordered by priority; unused here
	PermRead     = 4 // consumers may pull
	PermWrite    = 2 // producers may send
	PermInherit  = 1 // a template topic (TBW102): auto-created topics copy it
)

// Topic names with a meaning to every party.
const (
	// AutoCreateTopicKey is the template topic of auto-created topics:
	// producers name it as a send's defaultTopic.
	AutoCreateTopicKey = "TBW102"
	// RetryGroupTopicPrefix prefixes a consumer group's retry topic.
	RetryGroupTopicPrefix = "%RETRY%"
	// DLQGroupTopicPrefix prefixes a consumer group's dead-letter topic.
	DLQGroupTopicPrefix = "%DLQ%"
)

// ValidateTopicName checks a topic or group name against RocketMQ's rule:
// 1 to message.MaxTopicLen bytes of letters, digits, %, | , _ and -. The
// error says what is wrong; callers wrap it in a sentinel of their own.
func ValidateTopicName(name string) error {
	if name == "" {
		return errors.New("the name is empty")
	}
	if len(name) > message.MaxTopicLen {
		return fmt.Errorf("%q is longer than %d characters", name[:20]+"…", message.MaxTopicLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '%' || c == '|' || c == '_' || c == '-') {
			return fmt.Errorf("%q holds %q; allowed are letters, digits, %%, |, _ and -", name, c)
		}
	}
	return nil
}

// TopicConfig is a topic as a broker keeps it and registers it in
// REGISTER_BROKER (TopicConfigWrapper.TopicConfigTable). Brokers also
// persist it as this JSON.
type TopicConfig struct {
	TopicName       string `json:"topicName"`
	ReadQueueNums   int    `json:"readQueueNums"`   // queues consumers read: 0..ReadQueueNums-1
	WriteQueueNums  int    `json:"writeQueueNums"`  // queues producers write: 0..WriteQueueNums-1
	Perm            int    `json:"perm"`            // Perm* bits
	TopicFilterType string `json:"topicFilterType"` // "SINGLE_TAG" or "MULTI_TAG"
	TopicSysFlag    int    `json:"topicSysFlag"`    // RocketMQ's unit flags; carried, unused
	Order           bool   `json:"order"`           // the topic is ordered (informational)
	// MessageType is the message type RocketMQ 5 clients may send (its
	// "+message.type" attribute): NORMAL, FIFO, DELAY, TRANSACTION,
	// PRIORITY or LITE; empty (4.x topics) or MIXED accepts the first four.
	MessageType string `json:"messageType,omitempty"`
	// LiteExpiration, for a LITE topic, is how long in minutes a lite
	// topic lives after its last message (its "+lite.topic.expiration"
	// attribute); 0: for ever.
	LiteExpiration int `json:"liteTopicExpiration,omitempty"`
}

// Readable reports whether consumers may read the topic (PermRead).
func (tc TopicConfig) Readable() bool { return tc.Perm&PermRead != 0 }

// Writable reports whether producers may write the topic (PermWrite).
func (tc TopicConfig) Writable() bool { return tc.Perm&PermWrite != 0 }

// DataVersion versions a broker's topic table.
type DataVersion struct {
	Timestamp int64 `json:"timestamp"` // Unix milliseconds when the table was loaded
	Counter   int64 `json:"counter"`   // changes since then
}

// TopicConfigWrapper is a broker's topic table with its version.
type TopicConfigWrapper struct {
	TopicConfigTable map[string]TopicConfig `json:"topicConfigTable"` // by topic name
	DataVersion      DataVersion            `json:"dataVersion"`
}

// RegisterBrokerBody is the body of REGISTER_BROKER.
type RegisterBrokerBody struct {
	TopicConfigSerializeWrapper TopicConfigWrapper `json:"topicConfigSerializeWrapper"`
	FilterServerList            []string           `json:"filterServerList"` // always empty here
}

// QueueData is a broker's share of a topic in a route.
type QueueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int    `json:"readQueueNums"`
	WriteQueueNums int    `json:"writeQueueNums"`
	Perm           int    `json:"perm"` // Perm* bits
	TopicSysFlag   int    `json:"topicSysFlag"`
}

// BrokerData is a broker group in a route: its addresses by broker id, the
// master at id 0. JSON keys are the ids as strings ("0"); Java name servers
// write them bare ({0:"host:port"}), which a reader must quote first.
type BrokerData struct {
	Cluster     string           `json:"cluster"`
	BrokerName  string           `json:"brokerName"`
	BrokerAddrs map[int64]string `json:"brokerAddrs"` // "host:port" by broker id
	// GRPCAddrs are the members' RocketMQ 5 (gRPC) endpoints by broker
	// id, as they registered them (RegisterGRPCAddrField). This name
	// server sends them only to a route request that asks
	// (RouteGRPCAddrsField), so the body RocketMQ's clients parse is
	// unchanged.
	GRPCAddrs map[int64]string `json:"rmqGrpcAddrs,omitempty"`
}

// Header fields of this project's own, which Apache RocketMQ's name
// server ignores.
const (
	// RegisterGRPCAddrField in a REGISTER_BROKER header carries the
	// broker's advertised gRPC endpoint.
	RegisterGRPCAddrField = "rmqGrpcAddr"
	// RouteGRPCAddrsField set to "true" in a GET_ROUTEINFO_BY_TOPIC or
	// GET_BROKER_CLUSTER_INFO header asks for BrokerData.GRPCAddrs in the
	// answer.
	RouteGRPCAddrsField = "rmqGrpcAddrs"
)

// TopicRouteData is the body of a GET_ROUTEINFO_BY_TOPIC answer.
type TopicRouteData struct {
	OrderTopicConf    string              `json:"orderTopicConf"` // always empty here
	QueueDatas        []QueueData         `json:"queueDatas"`
	BrokerDatas       []BrokerData        `json:"brokerDatas"`
	FilterServerTable map[string][]string `json:"filterServerTable"` // always empty here
}

// ClusterInfo is the body of a GET_BROKER_CLUSTER_INFO answer.
type ClusterInfo struct {
	BrokerAddrTable  map[string]BrokerData `json:"brokerAddrTable"`  // by broker name
	ClusterAddrTable map[string][]string   `json:"clusterAddrTable"` // broker names by cluster
}

// TopicList is the body of a GET_ALL_TOPIC_LIST_FROM_NAMESERVER answer.
type TopicList struct {
	TopicList []string `json:"topicList"`
}

// HeartbeatData is the body of HEART_BEAT: the producer and consumer groups
// a client is a member of.
type HeartbeatData struct {
	ClientID        string         `json:"clientID"` // "ip@instance", unique per client
	ProducerDataSet []ProducerData `json:"producerDataSet"`
	ConsumerDataSet []ConsumerData `json:"consumerDataSet"`
}

// ProducerData is one producer group of a heartbeat.
type ProducerData struct {
	GroupName string `json:"groupName"`
}

// ConsumerData is one consumer group of a heartbeat.
type ConsumerData struct {
	GroupName           string             `json:"groupName"`
	ConsumeType         string             `json:"consumeType"`      // CONSUME_PASSIVELY (push) or CONSUME_ACTIVELY (pull)
	MessageModel        string             `json:"messageModel"`     // CLUSTERING or BROADCASTING
	ConsumeFromWhere    string             `json:"consumeFromWhere"` // e.g. CONSUME_FROM_LAST_OFFSET
	SubscriptionDataSet []SubscriptionData `json:"subscriptionDataSet"`
	UnitMode            bool               `json:"unitMode"` // carried, unused
}

// SubscriptionData is one topic subscription of a consumer group.
type SubscriptionData struct {
	ClassFilterMode bool     `json:"classFilterMode"` // carried, unused
	Topic           string   `json:"topic"`
	SubString       string   `json:"subString"`      // the expression: "TagA || TagB", "*", or SQL92
	TagsSet         []string `json:"tagsSet"`        // the tags of a TAG expression
	CodeSet         []string `json:"codeSet"`        // the tags' hash codes; carried, unused
	SubVersion      int64    `json:"subVersion"`     // a newer version replaces the subscription
	ExpressionType  string   `json:"expressionType"` // "TAG" (or empty) or "SQL92"
}

// CheckClientBody is the body of CHECK_CLIENT_CONFIG: a Java consumer asks,
// before it starts, whether the broker can apply a subscription that is
// not TAG.
type CheckClientBody struct {
	ClientID         string            `json:"clientId"`
	Group            string            `json:"group"`
	SubscriptionData *SubscriptionData `json:"subscriptionData"`
}

// Connection is one client connection of a group, as connection lists
// name it.
type Connection struct {
	ClientID   string `json:"clientId"`
	ClientAddr string `json:"clientAddr"` // the connection's remote ip:port
	Language   string `json:"language"`   // the client's language code, such as GO or JAVA
	Version    int16  `json:"version"`    // the client's RocketMQ version ordinal
}

// ConsumerConnection is the body of a GET_CONSUMER_CONNECTION_LIST answer:
// a consumer group's live clients and what the group subscribes to.
type ConsumerConnection struct {
	ConnectionSet     []Connection                `json:"connectionSet"`
	SubscriptionTable map[string]SubscriptionData `json:"subscriptionTable"` // by topic
	ConsumeType       string                      `json:"consumeType"`       // CONSUME_PASSIVELY or CONSUME_ACTIVELY
	MessageModel      string                      `json:"messageModel"`      // CLUSTERING or BROADCASTING
	ConsumeFromWhere  string                      `json:"consumeFromWhere"`  // e.g. CONSUME_FROM_LAST_OFFSET
}

// ProducerConnection is the body of a GET_PRODUCER_CONNECTION_LIST
// answer: a producer group's live clients.
type ProducerConnection struct {
	ConnectionSet []Connection `json:"connectionSet"`
}

// KVTable is the body of a GET_BROKER_RUNTIME_INFO answer: named figures,
// every value a string.
type KVTable struct {
	Table map[string]string `json:"table"`
}

// ConsumerListBody is the body of a GET_CONSUMER_LIST_BY_GROUP answer.
type ConsumerListBody struct {
	ConsumerIDList []string `json:"consumerIdList"` // the group's live client ids
}

// LockBatchBody is the body of LOCK_BATCH_MQ and UNLOCK_BATCH_MQ. Q is the
// queue type of the side that decodes it; each encodes as
// {"topic":…,"brokerName":…,"queueId":…}. It is generic because the broker
// and the client each have a queue type of their own, and this package may
// not import either.
type LockBatchBody[Q any] struct {
	ConsumerGroup  string `json:"consumerGroup"`
	ClientID       string `json:"clientId"`
	OnlyThisBroker bool   `json:"onlyThisBroker"` // carried, unused: every queue is the receiver's
	MQSet          []Q    `json:"mqSet"`
}

// LockBatchResult is the body of a LOCK_BATCH_MQ answer: the requested
// queues the client holds once the request is applied.
type LockBatchResult[Q any] struct {
	LockOKMQSet []Q `json:"lockOKMQSet"`
}
