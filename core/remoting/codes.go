package remoting

import "strconv"

// Request and response codes share one int16 field on the wire
// (Command.Code), and their number spaces overlap: 10 is SEND_MESSAGE in a
// request and FLUSH_DISK_TIMEOUT in a response. The constants below are
// untyped, so each one is usable directly wherever an int16 code is expected
// (Command.Code, Server.Handle, NewResponse). To name a code in a log line,
// convert it to the type of its direction: RequestCode(req.Code).String().
//
// The numbers are fixed by RocketMQ 4.x clients (QUERY_ASSIGNMENT by 5.x)
// and never change.

// RequestCode names a request code. It exists for its String method; the
// wire field is a plain int16.
type RequestCode int16

// ResponseCode names a response code. It exists for its String method; the
// wire field is a plain int16.
type ResponseCode int16

// Request codes.
const (
	SendMessage                      = 10  // SEND_MESSAGE: one message, header keys spelled out
	PullMessage                      = 11  // PULL_MESSAGE: long-polling read of one queue
	QueryMessage                     = 12  // QUERY_MESSAGE: by key index
	QueryConsumerOffset              = 14  // QUERY_CONSUMER_OFFSET
	UpdateConsumerOffset             = 15  // UPDATE_CONSUMER_OFFSET: the Go client does not wait for the reply
	UpdateAndCreateTopic             = 17  // UPDATE_AND_CREATE_TOPIC: admin
	GetAllTopicConfig                = 21  // GET_ALL_TOPIC_CONFIG: admin, the broker's topic table
	GetBrokerRuntimeInfo             = 28  // GET_BROKER_RUNTIME_INFO: admin, the broker's figures
	SearchOffsetByTimestamp          = 29  // SEARCH_OFFSET_BY_TIMESTAMP
	GetMaxOffset                     = 30  // GET_MAX_OFFSET
	GetMinOffset                     = 31  // GET_MIN_OFFSET
	GetEarliestMsgStoretime          = 32  // GET_EARLIEST_MSG_STORETIME
	ViewMessageByID                  = 33  // VIEW_MESSAGE_BY_ID: by commit-log offset
	HeartBeat                        = 34  // HEART_BEAT: producer and consumer registration
	UnregisterClient                 = 35  // UNREGISTER_CLIENT: Java and C++ clients
	ConsumerSendMsgBack              = 36  // CONSUMER_SEND_MSG_BACK: retry or dead-letter a message
	EndTransaction                   = 37  // END_TRANSACTION: commit or roll back a half message
	GetConsumerListByGroup           = 38  // GET_CONSUMER_LIST_BY_GROUP
	CheckTransactionState            = 39  // CHECK_TRANSACTION_STATE: broker → producer, oneway
	NotifyConsumerIdsChanged         = 40  // NOTIFY_CONSUMER_IDS_CHANGED: broker → consumer, oneway
	LockBatchMQ                      = 41  // LOCK_BATCH_MQ: orderly consumers
	UnlockBatchMQ                    = 42  // UNLOCK_BATCH_MQ
	CheckClientConfig                = 46  // CHECK_CLIENT_CONFIG: Java consumers with SQL92 subscriptions
	RegisterBroker                   = 103 // REGISTER_BROKER: broker → name server
	UnregisterBroker                 = 104 // UNREGISTER_BROKER: broker → name server
	GetRouteInfoByTopic              = 105 // GET_ROUTEINFO_BY_TOPIC: name server
	GetBrokerClusterInfo             = 106 // GET_BROKER_CLUSTER_INFO: name server
	UpdateAndCreateSubscriptionGroup = 200 // UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: admin
	GetAllSubscriptionGroupConfig    = 201 // GET_ALL_SUBSCRIPTIONGROUP_CONFIG: admin
	GetTopicStatsInfo                = 202 // GET_TOPIC_STATS_INFO: a topic's queue offsets
	GetConsumerConnectionList        = 203 // GET_CONSUMER_CONNECTION_LIST: a consumer group's clients
	GetProducerConnectionList        = 204 // GET_PRODUCER_CONNECTION_LIST: a producer group's clients
	GetAllTopicListFromNameserver    = 206 // GET_ALL_TOPIC_LIST_FROM_NAMESERVER: admin
	DeleteSubscriptionGroup          = 207 // DELETE_SUBSCRIPTIONGROUP: admin
	GetConsumeStats                  = 208 // GET_CONSUME_STATS: a group's offsets and lag
	DeleteTopicInBroker              = 215 // DELETE_TOPIC_IN_BROKER: admin
	DeleteTopicInNamesrv             = 216 // DELETE_TOPIC_IN_NAMESRV: admin
	ResetConsumerClientOffset        = 220 // RESET_CONSUMER_CLIENT_OFFSET: broker → consumer
	GetConsumerStatusFromClient      = 221 // GET_CONSUMER_STATUS_FROM_CLIENT: broker → consumer
	InvokeBrokerToResetOffset        = 222 // INVOKE_BROKER_TO_RESET_OFFSET: admin, relayed as 220
	InvokeBrokerToGetConsumerStatus  = 223 // INVOKE_BROKER_TO_GET_CONSUMER_STATUS: admin, relayed as 221
	GetConsumerRunningInfo           = 307 // GET_CONSUMER_RUNNING_INFO: admin → broker → consumer
	ConsumeMessageDirectly           = 309 // CONSUME_MESSAGE_DIRECTLY: admin → broker → consumer
	SendMessageV2                    = 310 // SEND_MESSAGE_V2: SEND_MESSAGE with one-letter header keys
	SendBatchMessage                 = 320 // SEND_BATCH_MESSAGE: V2 header, batch body
	SendReplyMessage                 = 324 // SEND_REPLY_MESSAGE: request/reply
	SendReplyMessageV2               = 325 // SEND_REPLY_MESSAGE_V2
	PushReplyMessageToClient         = 326 // PUSH_REPLY_MESSAGE_TO_CLIENT: broker → requester
	LitePullMessage                  = 361 // LITE_PULL_MESSAGE: a Java lite pull consumer's pull, PULL_MESSAGE's header
	RecallMessage                    = 370 // RECALL_MESSAGE: cancel a delayed message by its send's recall handle
	QueryAssignment                  = 400 // QUERY_ASSIGNMENT: RocketMQ 5, a consumer's queues chosen by the broker
)

// Response codes. Every one of them leaves the connection open: a response
// code reports on one request, never on the connection.
const (
	Success                    = 0   // SUCCESS
	SystemError                = 1   // SYSTEM_ERROR: sync sends retry on another queue
	SystemBusy                 = 2   // SYSTEM_BUSY
	RequestCodeNotSupported    = 3   // REQUEST_CODE_NOT_SUPPORTED
	FlushDiskTimeout           = 10  // FLUSH_DISK_TIMEOUT: the send still counts as done
	SlaveNotAvailable          = 11  // SLAVE_NOT_AVAILABLE: the send still counts as done
	FlushSlaveTimeout          = 12  // FLUSH_SLAVE_TIMEOUT: the send still counts as done
	MessageIllegal             = 13  // MESSAGE_ILLEGAL: send error, not retried
	ServiceNotAvailable        = 14  // SERVICE_NOT_AVAILABLE: sync sends retry
	NoPermission               = 16  // NO_PERMISSION: sync sends retry
	TopicNotExist              = 17  // TOPIC_NOT_EXIST: sync sends retry
	PullNotFound               = 19  // PULL_NOT_FOUND: no new message
	PullRetryImmediately       = 20  // PULL_RETRY_IMMEDIATELY: messages read, none matched
	PullOffsetMoved            = 21  // PULL_OFFSET_MOVED: the requested offset is out of range
	QueryNotFound              = 22  // QUERY_NOT_FOUND: no committed offset
	SubscriptionParseFailed    = 23  // SUBSCRIPTION_PARSE_FAILED
	SubscriptionNotExist       = 24  // SUBSCRIPTION_NOT_EXIST
	SubscriptionNotLatest      = 25  // SUBSCRIPTION_NOT_LATEST
	SubscriptionGroupNotExist  = 26  // SUBSCRIPTION_GROUP_NOT_EXIST
	FilterDataNotExist         = 27  // FILTER_DATA_NOT_EXIST
	FilterDataNotLatest        = 28  // FILTER_DATA_NOT_LATEST
	TransactionShouldCommit    = 200 // TRANSACTION_SHOULD_COMMIT
	TransactionShouldRollback  = 201 // TRANSACTION_SHOULD_ROLLBACK
	TransactionStateUnknown    = 202 // TRANSACTION_STATE_UNKNOW
	TransactionStateGroupWrong = 203 // TRANSACTION_STATE_GROUP_WRONG
	ConsumerNotOnline          = 206 // CONSUMER_NOT_ONLINE
	ConsumeMsgTimeout          = 207 // CONSUME_MSG_TIMEOUT
	NoMessage                  = 208 // NO_MESSAGE
	FlowControl                = 215 // FLOW_CONTROL
)

// isRefusal reports whether a response code refuses its request, rather
// than answering it (SUCCESS) or reporting a normal outcome such as
// PULL_NOT_FOUND or QUERY_NOT_FOUND. A Server logs the requests it
// refuses (Conn.noteRefusal).
func isRefusal(code int16) bool {
	switch code {
	case SystemError, SystemBusy, RequestCodeNotSupported, MessageIllegal, ServiceNotAvailable,
		NoPermission, TopicNotExist, SubscriptionParseFailed, SubscriptionNotExist,
		SubscriptionGroupNotExist, FilterDataNotExist, TransactionStateGroupWrong, FlowControl:
		return true
	}
	return false
}

// ResponseNotEncodable is what a Server answers when a handler's response
// cannot be sent: larger than the frame limit (ServerOptions.MaxFrameSize),
// a header beyond MaxHeaderSize, or otherwise not encodable. The handler
// has done its work by then, so the code is MESSAGE_ILLEGAL, which RocketMQ
// clients do not retry: a retried send would store its messages twice. The
// remark names the request and the size. The connection stays open.
const ResponseNotEncodable = MessageIllegal

var requestNames = map[RequestCode]string{
	SendMessage:                      "SEND_MESSAGE",
	PullMessage:                      "PULL_MESSAGE",
	QueryMessage:                     "QUERY_MESSAGE",
	QueryConsumerOffset:              "QUERY_CONSUMER_OFFSET",
	UpdateConsumerOffset:             "UPDATE_CONSUMER_OFFSET",
	UpdateAndCreateTopic:             "UPDATE_AND_CREATE_TOPIC",
	SearchOffsetByTimestamp:          "SEARCH_OFFSET_BY_TIMESTAMP",
	GetMaxOffset:                     "GET_MAX_OFFSET",
	GetMinOffset:                     "GET_MIN_OFFSET",
	GetEarliestMsgStoretime:          "GET_EARLIEST_MSG_STORETIME",
	ViewMessageByID:                  "VIEW_MESSAGE_BY_ID",
	HeartBeat:                        "HEART_BEAT",
	UnregisterClient:                 "UNREGISTER_CLIENT",
	ConsumerSendMsgBack:              "CONSUMER_SEND_MSG_BACK",
	EndTransaction:                   "END_TRANSACTION",
	GetConsumerListByGroup:           "GET_CONSUMER_LIST_BY_GROUP",
	CheckTransactionState:            "CHECK_TRANSACTION_STATE",
	NotifyConsumerIdsChanged:         "NOTIFY_CONSUMER_IDS_CHANGED",
	LockBatchMQ:                      "LOCK_BATCH_MQ",
	UnlockBatchMQ:                    "UNLOCK_BATCH_MQ",
	CheckClientConfig:                "CHECK_CLIENT_CONFIG",
	RegisterBroker:                   "REGISTER_BROKER",
	UnregisterBroker:                 "UNREGISTER_BROKER",
	GetRouteInfoByTopic:              "GET_ROUTEINFO_BY_TOPIC",
	GetBrokerClusterInfo:             "GET_BROKER_CLUSTER_INFO",
	UpdateAndCreateSubscriptionGroup: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
	GetAllSubscriptionGroupConfig:    "GET_ALL_SUBSCRIPTIONGROUP_CONFIG",
	GetTopicStatsInfo:                "GET_TOPIC_STATS_INFO",
	GetAllTopicConfig:                "GET_ALL_TOPIC_CONFIG",
	GetBrokerRuntimeInfo:             "GET_BROKER_RUNTIME_INFO",
	GetConsumerConnectionList:        "GET_CONSUMER_CONNECTION_LIST",
	GetProducerConnectionList:        "GET_PRODUCER_CONNECTION_LIST",
	GetAllTopicListFromNameserver:    "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
	DeleteSubscriptionGroup:          "DELETE_SUBSCRIPTIONGROUP",
	GetConsumeStats:                  "GET_CONSUME_STATS",
	DeleteTopicInBroker:              "DELETE_TOPIC_IN_BROKER",
	DeleteTopicInNamesrv:             "DELETE_TOPIC_IN_NAMESRV",
	ResetConsumerClientOffset:        "RESET_CONSUMER_CLIENT_OFFSET",
	GetConsumerStatusFromClient:      "GET_CONSUMER_STATUS_FROM_CLIENT",
	InvokeBrokerToResetOffset:        "INVOKE_BROKER_TO_RESET_OFFSET",
	InvokeBrokerToGetConsumerStatus:  "INVOKE_BROKER_TO_GET_CONSUMER_STATUS",
	GetConsumerRunningInfo:           "GET_CONSUMER_RUNNING_INFO",
	ConsumeMessageDirectly:           "CONSUME_MESSAGE_DIRECTLY",
	SendMessageV2:                    "SEND_MESSAGE_V2",
	SendBatchMessage:                 "SEND_BATCH_MESSAGE",
	SendReplyMessage:                 "SEND_REPLY_MESSAGE",
	SendReplyMessageV2:               "SEND_REPLY_MESSAGE_V2",
	PushReplyMessageToClient:         "PUSH_REPLY_MESSAGE_TO_CLIENT",
	LitePullMessage:                  "LITE_PULL_MESSAGE",
	RecallMessage:                    "RECALL_MESSAGE",
	QueryAssignment:                  "QUERY_ASSIGNMENT",
}

var responseNames = map[ResponseCode]string{
	Success:                    "SUCCESS",
	SystemError:                "SYSTEM_ERROR",
	SystemBusy:                 "SYSTEM_BUSY",
	RequestCodeNotSupported:    "REQUEST_CODE_NOT_SUPPORTED",
	FlushDiskTimeout:           "FLUSH_DISK_TIMEOUT",
	SlaveNotAvailable:          "SLAVE_NOT_AVAILABLE",
	FlushSlaveTimeout:          "FLUSH_SLAVE_TIMEOUT",
	MessageIllegal:             "MESSAGE_ILLEGAL",
	ServiceNotAvailable:        "SERVICE_NOT_AVAILABLE",
	NoPermission:               "NO_PERMISSION",
	TopicNotExist:              "TOPIC_NOT_EXIST",
	PullNotFound:               "PULL_NOT_FOUND",
	PullRetryImmediately:       "PULL_RETRY_IMMEDIATELY",
	PullOffsetMoved:            "PULL_OFFSET_MOVED",
	QueryNotFound:              "QUERY_NOT_FOUND",
	SubscriptionParseFailed:    "SUBSCRIPTION_PARSE_FAILED",
	SubscriptionNotExist:       "SUBSCRIPTION_NOT_EXIST",
	SubscriptionNotLatest:      "SUBSCRIPTION_NOT_LATEST",
	SubscriptionGroupNotExist:  "SUBSCRIPTION_GROUP_NOT_EXIST",
	FilterDataNotExist:         "FILTER_DATA_NOT_EXIST",
	FilterDataNotLatest:        "FILTER_DATA_NOT_LATEST",
	TransactionShouldCommit:    "TRANSACTION_SHOULD_COMMIT",
	TransactionShouldRollback:  "TRANSACTION_SHOULD_ROLLBACK",
	TransactionStateUnknown:    "TRANSACTION_STATE_UNKNOW",
	TransactionStateGroupWrong: "TRANSACTION_STATE_GROUP_WRONG",
	ConsumerNotOnline:          "CONSUMER_NOT_ONLINE",
	ConsumeMsgTimeout:          "CONSUME_MSG_TIMEOUT",
	NoMessage:                  "NO_MESSAGE",
	FlowControl:                "FLOW_CONTROL",
}

// String returns the protocol name of the code, such as "SEND_MESSAGE", or
// "RequestCode(n)" for a number this package does not know.
func (c RequestCode) String() string {
	if s, ok := requestNames[c]; ok {
		return s
	}
	return "RequestCode(" + strconv.Itoa(int(c)) + ")"
}

// String returns the protocol name of the code, such as "PULL_NOT_FOUND", or
// "ResponseCode(n)" for a number this package does not know.
func (c ResponseCode) String() string {
	if s, ok := responseNames[c]; ok {
		return s
	}
	return "ResponseCode(" + strconv.Itoa(int(c)) + ")"
}
