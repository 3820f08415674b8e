// Package namesrv is the name server: brokers register their topic tables
// with it, and clients ask it where a topic's queues live.
//
// It keeps, per broker address, the full topic table that broker last
// registered, and builds every route from those tables, so a route is
// always exactly what the live brokers last said. A broker that has not
// re-registered within BrokerExpiry is dropped.
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
// # Access control
//
// The name server decides nothing about access itself: Options.Authorize,
// when set, is asked before every request. The broker process passes its
// core/acl checker there, so registering, unregistering a broker and
// deleting a route are admin-only and a broker signs its registrations
// with its own admin account.
//
// # Invariants
//
//  1. A route names only brokers that registered the topic and have not
//     expired.
//  2. A topic no live broker registered gets TOPIC_NOT_EXIST, except a
//     retry topic (%RETRY%group), which is answered with one queue on every
//     live master (see Options.RetryRoutes).
package namesrv
