// Package namesrv is the name server: brokers register their topic tables
// with it, and clients ask it where a topic's queues live.
//
// It keeps, per broker address, the topic table that broker registered,
// and builds every route from those tables, so a route is always what the
// live brokers last said. A broker that has not re-registered within
// BrokerExpiry is dropped.
//
// # Registration
//
// REGISTER_BROKER carries a topic table in its body. A full registration
// replaces the table held for the broker's address; one whose header has
// the extension field incremental=true holds only the topics that changed
// and is merged into it, topic by topic. This broker sends a full one
// when it starts, every RegisterInterval and after a topic is deleted,
// and an incremental one for each topic it creates or changes, so that
// creating n topics costs O(n) rather than O(n²). RocketMQ's own name
// server ignores the field and merges every registration; its topics
// leave a route only by DELETE_TOPIC_IN_NAMESRV.
//
//	+----------------+---------------------------------------------+
//	| header field   | meaning                                     |
//	+----------------+---------------------------------------------+
//	| brokerName     | the broker's name in routes (required)      |
//	| brokerAddr     | where clients dial it; keys its table       |
//	| clusterName    | default DefaultCluster                      |
//	| brokerId       | 0 for a master                              |
//	| compressed     | must be false                               |
//	| incremental    | "true": merge the body's topics (extension) |
//	| rmqGrpcAddr    | the broker's gRPC endpoint (extension)      |
//	+----------------+---------------------------------------------+
//
// # Route JSON
//
// GET_ROUTEINFO_BY_TOPIC answers with compact JSON (no whitespace: the Go
// client splits brokerAddrs by hand and does not trim spaces):
//
//	{"orderTopicConf":"","queueDatas":[{"brokerName":"broker-a","readQueueNums":4,
//	 "writeQueueNums":4,"perm":6,"topicSysFlag":0}],"brokerDatas":[{"cluster":"DefaultCluster",
//	 "brokerName":"broker-a","brokerAddrs":{"0":"127.0.0.1:10911"}}],"filterServerTable":{}}
//
// queueDatas is always an array, and every brokerData carries brokerAddrs,
// with the master at id 0.
//
// A request whose header has rmqGrpcAddrs=true (this project's brokers
// and `broker admin cluster list` send it, the latter with
// GET_BROKER_CLUSTER_INFO) also gets each brokerData's rmqGrpcAddrs: the gRPC endpoints
// its members registered, by broker id, so the gRPC endpoint of one
// broker set can route RocketMQ 5 clients to the others. Every other
// request gets the body above, which RocketMQ's clients parse.
//
// # Access control
//
// The name server decides nothing about access itself: Options.Authorize,
// when set, is asked before every request. The broker process passes its
// core/acl checker there, so registering, unregistering a broker and
// deleting a route are admin-only: a broker signs its registrations with
// its own admin account, except the broker of the same process, which
// reaches its embedded name server in-process and is trusted.
//
// # Invariants
//
//  1. A route names only brokers that registered the topic and have not
//     expired (a retry topic's: see 2). After a broker's full registration, the topics held for it
//     are exactly that registration's; each later incremental one adds or
//     updates its topics and removes none.
//  2. A topic no live broker registered gets TOPIC_NOT_EXIST, except a
//     retry topic (%RETRY%group), whose route also names, with one queue,
//     every live master that has not registered it (see
//     Options.RetryRoutes).
package namesrv
