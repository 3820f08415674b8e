package grpcserver

import "github.com/rmq-go/rmq/core/message"

// systemKeys are the properties RocketMQ and this broker keep for
// themselves: carried in a message's SystemProperties or not shown at all,
// never among its user properties, and refused as user properties of a
// send. They are RocketMQ's (MessageConst.STRING_HASH_SET, which its proxy
// hides and refuses alike), and the ones its proxy maps to SystemProperties
// besides.
var systemKeys = map[string]bool{}

func init() {
	for _, k := range []string{
		// The broker's own names.
		message.PropertyTags, message.PropertyKeys, message.PropertyUniqKey, message.PropertyDelayLevel,
		message.PropertyTimerDeliverMS, message.PropertyTimerDelaySec, message.PropertyTimerDelayMS, message.PropertyTimerOutMS,
		message.PropertyWaitStoreOK, message.PropertyTransactionPrepared, message.PropertyProducerGroup, message.PropertyRealTopic,
		message.PropertyRealQueueID, message.PropertyRetryTopic, message.PropertyOriginMessageID, message.PropertyMaxReconsumeTimes,
		message.PropertyReconsumeTime, message.PropertyCheckImmunityTime, message.PropertyTransactionCheckTimes, message.PropertyTransactionID,
		message.PropertyCluster, message.PropertyShardingKey, message.PropertyShardingKeyOld, message.PropertyMinOffset, message.PropertyMaxOffset,
		message.PropertyCorrelationID, message.PropertyReplyToClient, message.PropertyMessageType, message.PropertyPushReplyTime,
		message.PropertyPriority, message.PropertyTraceContext, message.PropertyBornHost,
		// The rest of RocketMQ's.
		"MSG_REGION", "TRACE_ON", "__STARTDELIVERTIME", "INSTANCE_ID", "BUYER_ID", "TRANSFER_FLAG", "CORRECTION_FLAG",
		"MQ2_FLAG", "CONSUME_START_TIME", "POP_CK", "POP_CK_OFFSET", "1ST_POP_TIME", "TRAN_PREPARED_QUEUE_OFFSET",
		"DUP_INFO", "EXTEND_UNIQ_INFO", "TTL", "ARRIVE_TIME", "INNER_MULTI_QUEUE_OFFSET", "TIMER_ENQUEUE_MS",
		"TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES", "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", "BORN_TIMESTAMP",
		"DLQ_ORIGIN_TOPIC", "DLQ_ORIGIN_MESSAGE_ID", "__CRC32#",
	} {
		systemKeys[k] = true
	}
}
