// Package acl owns access control compatible with RocketMQ 4.x's plain
// ACL: the request signature the official clients compute when given
// credentials, the configuration (RocketMQ's plain_acl.yml field names),
// the permission model, and the table of what each request code needs. It
// decides; the broker and the name server ask it once per request and
// answer NO_PERMISSION with the refusal's text.
//
// Wiring is one call per request:
//
//	err := checker.Check(remoteAddr, req)                    // most codes
//	err := checker.Check(remoteAddr, req, bodyResources...)  // heartbeats, locks, END_TRANSACTION, ...
//
// # Signature
//
// A signed request carries three extFields: AccessKey, Signature and,
// optionally, SecurityToken. Signature is
//
//	base64.StdEncoding( HMAC-SHA1( secretKey, content ) )
//	content = value(k1) + value(k2) + ... + value(kn) + body
//
// where k1 < k2 < ... < kn are every extFields key except Signature and
// _UNIQUE_KEY_QUERY (old Java clients add it after signing), in byte
// order, including AccessKey and SecurityToken; values are concatenated
// with no separator, as UTF-8. This is RocketMQ's AclUtils /
// PlainAccessResource. The official Go client (WithCredentials) computes
// the same but leaves SecurityToken out of the content; Verify accepts
// both forms (the plain ACL never checks the token). The comparison is of
// the base64 text, as RocketMQ compares strings, in constant time.
//
// The scheme authenticates, it does not protect: there is no timestamp or
// nonce, so a captured request verifies again when replayed, and values
// are joined without separators, so characters can move between adjacent
// fields of a captured request without changing its signature. Both are
// RocketMQ's protocol; on untrusted networks run it over TLS.
//
// RocketMQ 5's gRPC clients sign one header instead: their authorization
// metadata is "MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=x-mq-date-time,
// Signature=HEX", HEX being HMAC-SHA1(secretKey, x-mq-date-time) in
// hexadecimal. CheckSigned applies the same accounts, address rules and
// permissions to it (there are no request codes: the caller names the
// topics and groups); the date is not checked for freshness, so it too
// can be replayed.
//
// # Configuration
//
// Under acl: in the broker's file, or a plain_acl.yml as is:
//
//	enabled: true
//	globalWhiteRemoteAddresses: [10.10.103.*, 192.168.0.0/16]
//	accounts:
//	  - accessKey: RocketMQ          # > 6 characters, unique
//	    secretKey: 12345678          # > 6 characters, no control characters
//	    whiteRemoteAddress: 192.168.1.*   # optional: the account's only source
//	    admin: false
//	    defaultTopicPerm: DENY       # empty: DENY
//	    defaultGroupPerm: SUB        # empty: DENY
//	    topicPerms: [Orders=PUB|SUB, Audit=DENY]
//	    groupPerms: [billing=SUB]    # consumer groups
//
// Permissions are DENY, PUB, SUB and PUB|SUB (also SUB|PUB, ANY). Address
// patterns are *, one IPv4 or IPv6 address, per-octet IPv4 patterns
// (192.168.1.*, 192.168.*.*, 192.168.1.1-100, 192.168.1.{1,5}) and CIDR
// (10.0.0.0/8, fd00::/8). Parsing is strict: an unknown key is an error
// naming it and its line (RocketMQ's own dataVersion block is accepted and
// ignored); every problem of the file is reported at once.
//
// # Request codes
//
// A resource is a topic or a consumer group; a retry topic %RETRY%g is
// group g's, and a need of PUB there becomes SUB (a group's consumers may
// send into its retry topic; nobody else may). "caller" resources come
// from the body or the store, which only the broker reads; for the codes
// marked "required" the caller must name at least one.
//
//	+-------------------------------------+-----------------------------------------+
//	| code                                | needs                                   |
//	+-------------------------------------+-----------------------------------------+
//	| SEND_MESSAGE, SEND_REPLY_MESSAGE    | PUB on topic (%RETRY%g: SUB on group g) |
//	| SEND_MESSAGE_V2, SEND_BATCH_MESSAGE | PUB on topic "b" (same retry rule)      |
//	|   SEND_REPLY_MESSAGE_V2             |                                         |
//	| PULL_MESSAGE, QUERY_CONSUMER_OFFSET | SUB on consumerGroup and on topic       |
//	|   UPDATE_CONSUMER_OFFSET,           |                                         |
//	|   LITE_PULL_MESSAGE                 |                                         |
//	| QUERY_MESSAGE, GET_MAX_OFFSET,      | SUB on topic                            |
//	|   GET_MIN_OFFSET, SEARCH_OFFSET_BY_ |                                         |
//	|   TIMESTAMP, GET_EARLIEST_MSG_STORE |                                         |
//	| GET_CONSUMER_LIST_BY_GROUP          | SUB on consumerGroup                    |
//	| GET_CONSUME_STATS                   | SUB on consumerGroup; on topic, when    |
//	|                                     |   present                               |
//	| GET_TOPIC_STATS_INFO                | SUB on topic                            |
//	| GET_CONSUMER_CONNECTION_LIST        | SUB on consumerGroup                    |
//	| UNREGISTER_CLIENT                   | SUB on consumerGroup, when present      |
//	| CONSUMER_SEND_MSG_BACK              | SUB on group and on originTopic         |
//	| GET_ROUTEINFO_BY_TOPIC              | PUB or SUB on topic                     |
//	| HEART_BEAT                          | caller: SUB on each consumer group and  |
//	|                                     |   subscribed topic of the body          |
//	| GET_BROKER_CLUSTER_INFO             | any account                             |
//	| RECALL_MESSAGE                      | PUB on topic                            |
//	| VIEW_MESSAGE_BY_ID                  | caller, required: SUB on stored topic   |
//	| END_TRANSACTION                     | caller, required: PUB on half's topic   |
//	| LOCK_BATCH_MQ, UNLOCK_BATCH_MQ      | caller, required: SUB on body's group   |
//	|                                     |   and topics                            |
//	| CHECK_CLIENT_CONFIG                 | caller, required: SUB on body's group   |
//	| QUERY_ASSIGNMENT                    | caller, required: SUB on body's group   |
//	|                                     |   and topic                             |
//	| UPDATE_AND_CREATE_TOPIC, DELETE_    | admin                                   |
//	|   TOPIC_IN_BROKER, UPDATE_AND_CREATE|                                         |
//	|   _SUBSCRIPTIONGROUP, GET_ALL_SUB-  |                                         |
//	|   SCRIPTIONGROUP_CONFIG, DELETE_SUB-|                                         |
//	|   SCRIPTIONGROUP, GET_PRODUCER_CON- |                                         |
//	|   NECTION_LIST (a producer group is |                                         |
//	|   no resource)                      |                                         |
//	| GET_ALL_TOPIC_CONFIG, GET_BROKER_   | admin: broker-wide                      |
//	|   RUNTIME_INFO                      |                                         |
//	| INVOKE_BROKER_TO_RESET_OFFSET,      | admin: relayed to a group's clients     |
//	|   INVOKE_BROKER_TO_GET_CONSUMER_    |                                         |
//	|   STATUS, GET_CONSUMER_RUNNING_INFO,|                                         |
//	|   CONSUME_MESSAGE_DIRECTLY          |                                         |
//	| REGISTER_BROKER, UNREGISTER_BROKER, | admin                                   |
//	|   DELETE_TOPIC_IN_NAMESRV, GET_ALL_ |                                         |
//	|   TOPIC_LIST_FROM_NAMESERVER        |                                         |
//	| broker → client codes (CHECK_TRANS- | admin: no client sends them             |
//	|   ACTION_STATE, NOTIFY_CONSUMER_IDS_|                                         |
//	|   CHANGED, RESET_CONSUMER_CLIENT_   |                                         |
//	|   OFFSET, GET_CONSUMER_STATUS_FROM_ |                                         |
//	|   CLIENT, PUSH_REPLY_MESSAGE_TO_    |                                         |
//	|   CLIENT)                           |                                         |
//	| any other code, such as the broker's| admin                                   |
//	|   own admin commands (30000: plugin |                                         |
//	|   reload, DLQ resend, offsets)      |                                         |
//	+-------------------------------------+-----------------------------------------+
//
// Invariants:
//
//  1. Deny by default: a code missing from the table is admin-only, an
//     empty defaultTopicPerm or defaultGroupPerm is DENY, a required
//     extFields key that is absent is checked as a resource named "",
//     which only a default can allow, and a "required" code the caller
//     names no resource for is refused.
//  2. A request from a globally white-listed address is allowed
//     everything without an account or signature (RocketMQ's rule). Every
//     other request is refused unless it names a configured account,
//     comes from that account's whiteRemoteAddress when it has one, and
//     carries that account's valid Signature.
//  3. Admin-only codes need an account with admin: true. Admin grants no
//     resource by itself, except that an admin account with no topicPerms
//     and no groupPerms holds PUB|SUB on everything (RocketMQ's rule).
//  4. A per-resource permission replaces the default for that resource;
//     DENY there refuses even when the default allows. A need of PUB|SUB
//     is met by either.
//  5. Check refuses with a *Denied wrapping ErrDenied that names the code,
//     the account, and what was missing (account, address, signature,
//     admin, or the permission on the resource); it allocates only then.
//  6. A Checker is immutable; reloading builds a new one from a validated
//     Config, so a bad file never replaces a good one half-way.
//
// Where this differs from RocketMQ 4.x, on purpose:
//
//   - An account's whiteRemoteAddress restricts where the account may be
//     used from; in RocketMQ a match skips the signature and permission
//     checks. A request carrying an AccessKey comes from a client holding
//     the secret, so it signs anyway; the bypass only widened an account.
//   - Sends into %RETRY%g need SUB on group g, the group the topic
//     belongs to; RocketMQ checks the sender's producer group.
//     CONSUMER_SEND_MSG_BACK needs SUB on originTopic where RocketMQ asks
//     for PUB: the consumer got the message from there.
//   - Resources RocketMQ 4.x does not check are checked here: offsets and
//     queries by topic, locks, END_TRANSACTION, VIEW_MESSAGE_BY_ID, route
//     lookups; and name-server registration and every unknown code are
//     admin-only.
//   - An unknown permission string is an error; RocketMQ reads it as DENY.
package acl
