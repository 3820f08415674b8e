// Package apacheimport reads what an Apache RocketMQ broker keeps of its
// metadata, and decides what of it this broker takes over: the files of
// ${storePathRootDir}/config and broker.conf. It changes nothing itself:
// [ReadDir] decodes the files, [NewPlan] makes the plan (topics and groups
// to create, consumer offsets to set, what is skipped and why, broker.conf
// mapped onto this broker's config file), and "broker import" applies the
// plan through a running broker's remoting API, as an operator's mqadmin
// would, so access control and replication apply to it.
//
// # Formats
//
// Apache writes each file with fastjson in its pretty format (tab
// indents, fields sorted by name); a map with integer keys is written
// with the keys bare, which is not JSON, and the decoders quote them
// first:
//
//	file                    top-level fields            table
//	topics.json             topicConfigTable,           topic → {topicName, readQueueNums,
//	                        dataVersion                 writeQueueNums, perm, topicFilterType,
//	                                                    topicSysFlag, order, attributes}
//	subscriptionGroup.json  subscriptionGroupTable,     group → {groupName, consumeEnable,
//	                        forbiddenTable,             consumeFromMinEnable, consumeBroadcastEnable,
//	                        dataVersion                 consumeMessageOrderly, retryQueueNums,
//	                                                    retryMaxTimes, groupRetryPolicy, brokerId, ...}
//	consumerOffset.json     offsetTable, dataVersion    "topic@group" → {queueId: offset}
//	delayOffset.json        offsetTable, dataVersion    delay level → offset
//
// broker.conf is a java.util.Properties file ([DecodeProperties]).
//
// # Rules
//
//  1. Apache's own topics and groups are not imported: the fixed names of
//     TopicValidator and MixAll (TBW102, SCHEDULE_TOPIC_XXXX, the
//     transaction and trace topics, SELF_TEST_TOPIC, TOOLS_CONSUMER,
//     CID_ONSAPI_*, CID_RMQ_SYS_*, ...), names starting rmq_sys_, the topics
//     named after the cluster and the broker, and topics carrying the
//     inherit permission bit, which only Apache's template, cluster- and
//     broker-name topics have. %RETRY% and %DLQ% topics are not imported
//     either: this broker creates a group's own.
//  2. Messages are not migrated. An offset is imported for a topic that is
//     imported and a queue it has; "broker import" sets it where this
//     broker holds that offset and clamps it into the queue's min..max
//     otherwise, saying so. Offsets of retry topics and delayOffset.json
//     point at messages that are not here and are skipped.
//  3. A file that is missing is noted and skipped (a missing or empty
//     file with Apache's .bak copy is read from the copy); a file that
//     cannot be read or decoded fails [ReadDir] whole, so an import never
//     starts on half its input.
//  4. broker.conf keys with an equivalent map to this broker's key
//     ([MapBrokerConf]); every other key is listed with why.
package apacheimport
