package acl

import (
	"strconv"
	"strings"

	"github.com/rmq-go/rmq/core/remoting"
)

// retryPrefix starts a consumer group's retry topic, %RETRY%group.
const retryPrefix = "%RETRY%"

// Kind says whether a resource is a topic or a consumer group.
type Kind uint8

// Resource kinds.
const (
	Topic Kind = iota + 1
	Group
)

// String returns "topic" or "group".
func (k Kind) String() string {
	switch k {
	case Topic:
		return "topic"
	case Group:
		return "group"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Resource is a topic or group a request touches and the permission it
// needs there. A need of PubSub is met by either.
type Resource struct {
	Kind Kind
	Name string
	Perm Perm
}

// TopicRes returns the resource of topic name with need p. A retry topic,
// %RETRY%group, is its group's: it becomes Group group, and a need of PUB
// there becomes SUB, as RocketMQ rules (a group's consumers send into its
// retry topic; nobody else may).
func TopicRes(name string, p Perm) Resource {
	if g, ok := strings.CutPrefix(name, retryPrefix); ok {
		if p == Pub {
			p = Sub
		}
		return Resource{Kind: Group, Name: g, Perm: p}
	}
	return Resource{Kind: Topic, Name: name, Perm: p}
}

// GroupRes returns the resource of consumer group name with need p.
func GroupRes(name string, p Perm) Resource {
	return Resource{Kind: Group, Name: strings.TrimPrefix(name, retryPrefix), Perm: p}
}

// access is who may send a request code.
type access uint8

const (
	// adminOnly: an admin account. The zero value, so a code missing
	// from codeRules is admin-only.
	adminOnly access = iota
	// anyAccount: any valid account that holds every resource the
	// request names (from extFields and from the caller).
	anyAccount
	// callerResources: as anyAccount, and the caller must name at least
	// one resource, found in the body or the store; with none the request
	// is refused.
	callerResources
)

// field is an extFields key naming a resource.
type field struct {
	key      string
	kind     Kind
	perm     Perm
	optional bool // absent or empty: nothing to check
}

// codeRule is what one request code needs.
type codeRule struct {
	access access
	fields []field
	// from says what the caller adds for callerResources (and for
	// anyAccount codes with body resources), for doc.go and refusals.
	from string
}

var (
	sendFields   = []field{{key: "topic", kind: Topic, perm: Pub}}
	sendV2Fields = []field{{key: "b", kind: Topic, perm: Pub}}
	topicSub     = []field{{key: "topic", kind: Topic, perm: Sub}}
	groupTopic   = []field{{key: "consumerGroup", kind: Group, perm: Sub}, {key: "topic", kind: Topic, perm: Sub}}
)

// codeRules maps every request code of core/remoting to what it needs.
// Codes absent here are admin-only. doc.go's table is this one.
var codeRules = map[int16]codeRule{
	remoting.SendMessage:        {access: anyAccount, fields: sendFields},
	remoting.SendMessageV2:      {access: anyAccount, fields: sendV2Fields},
	remoting.SendBatchMessage:   {access: anyAccount, fields: sendV2Fields},
	remoting.SendReplyMessage:   {access: anyAccount, fields: sendFields},
	remoting.SendReplyMessageV2: {access: anyAccount, fields: sendV2Fields},
	remoting.RecallMessage:      {access: anyAccount, fields: []field{{key: "topic", kind: Topic, perm: Pub}}},

	remoting.PullMessage:             {access: anyAccount, fields: groupTopic},
	remoting.LitePullMessage:         {access: anyAccount, fields: groupTopic},
	remoting.QueryConsumerOffset:     {access: anyAccount, fields: groupTopic},
	remoting.UpdateConsumerOffset:    {access: anyAccount, fields: groupTopic},
	remoting.QueryMessage:            {access: anyAccount, fields: topicSub},
	remoting.SearchOffsetByTimestamp: {access: anyAccount, fields: topicSub},
	remoting.GetMaxOffset:            {access: anyAccount, fields: topicSub},
	remoting.GetMinOffset:            {access: anyAccount, fields: topicSub},
	remoting.GetEarliestMsgStoretime: {access: anyAccount, fields: topicSub},
	remoting.GetConsumerListByGroup:  {access: anyAccount, fields: []field{{key: "consumerGroup", kind: Group, perm: Sub}}},
	remoting.UnregisterClient:        {access: anyAccount, fields: []field{{key: "consumerGroup", kind: Group, perm: Sub, optional: true}}},
	remoting.ConsumerSendMsgBack:     {access: anyAccount, fields: []field{{key: "group", kind: Group, perm: Sub}, {key: "originTopic", kind: Topic, perm: Sub, optional: true}}},
	remoting.HeartBeat:               {access: anyAccount, from: "SUB on each consumer group and subscribed topic of the body"},
	remoting.GetRouteInfoByTopic:     {access: anyAccount, fields: []field{{key: "topic", kind: Topic, perm: PubSub}}},
	remoting.GetBrokerClusterInfo:    {access: anyAccount},
	// A group's lag reads the group's state and the topic's offsets.
	remoting.GetConsumeStats:           {access: anyAccount, fields: []field{{key: "consumerGroup", kind: Group, perm: Sub}, {key: "topic", kind: Topic, perm: Sub, optional: true}}},
	remoting.GetTopicStatsInfo:         {access: anyAccount, fields: topicSub},
	remoting.GetConsumerConnectionList: {access: anyAccount, fields: []field{{key: "consumerGroup", kind: Group, perm: Sub}}},

	remoting.ViewMessageByID:   {access: callerResources, from: "SUB on the stored message's topic"},
	remoting.EndTransaction:    {access: callerResources, from: "PUB on the half message's topic"},
	remoting.LockBatchMQ:       {access: callerResources, from: "SUB on the body's consumer group and topics"},
	remoting.UnlockBatchMQ:     {access: callerResources, from: "SUB on the body's consumer group and topics"},
	remoting.CheckClientConfig: {access: callerResources, from: "SUB on the body's consumer group"},
	remoting.QueryAssignment:   {access: callerResources, from: "SUB on the body's consumer group and topic"},

	// Administration.
	remoting.UpdateAndCreateTopic:             {access: adminOnly},
	remoting.DeleteTopicInBroker:              {access: adminOnly},
	remoting.UpdateAndCreateSubscriptionGroup: {access: adminOnly},
	remoting.GetAllSubscriptionGroupConfig:    {access: adminOnly},
	// A producer group is no resource here, so its connections are
	// admin's to list.
	remoting.GetProducerConnectionList: {access: adminOnly},
	remoting.GetAllTopicConfig:         {access: adminOnly},
	remoting.GetBrokerRuntimeInfo:      {access: adminOnly},
	remoting.DeleteSubscriptionGroup:   {access: adminOnly},
	// Relays to a group's clients: they move a group's offsets, or make
	// a client consume, or read its state.
	remoting.InvokeBrokerToResetOffset:       {access: adminOnly},
	remoting.InvokeBrokerToGetConsumerStatus: {access: adminOnly},
	remoting.GetAllTopicListFromNameserver:   {access: adminOnly},
	remoting.DeleteTopicInNamesrv:            {access: adminOnly},
	remoting.RegisterBroker:                  {access: adminOnly},
	remoting.UnregisterBroker:                {access: adminOnly},
	// Broker → client requests: no client sends them to a broker.
	// GET_CONSUMER_RUNNING_INFO and CONSUME_MESSAGE_DIRECTLY are also an
	// admin's requests to the broker, which relays them to the client.
	remoting.CheckTransactionState:       {access: adminOnly},
	remoting.NotifyConsumerIdsChanged:    {access: adminOnly},
	remoting.ResetConsumerClientOffset:   {access: adminOnly},
	remoting.GetConsumerStatusFromClient: {access: adminOnly},
	remoting.GetConsumerRunningInfo:      {access: adminOnly},
	remoting.ConsumeMessageDirectly:      {access: adminOnly},
	remoting.PushReplyMessageToClient:    {access: adminOnly},
}

// RequestResources appends to dst the resources req names in its
// extFields, with the permission each needs, and returns the extended
// slice: the topic of sends (PUB; SUB on the group for a retry topic),
// pulls, offsets and queries (SUB), the consumer group of pulls, offsets,
// send-back and consumer lists (SUB), the topic of a route lookup (PUB or
// SUB). Send headers are read under their long keys (SEND_MESSAGE,
// SEND_REPLY_MESSAGE) or one-letter ones (SEND_MESSAGE_V2, batches,
// SEND_REPLY_MESSAGE_V2: b is the topic). A required key that is absent
// is named with an empty name, which only default permissions can allow.
// Resources in the body or the store are the caller's to add; see Check.
func RequestResources(req *remoting.Command, dst []Resource) []Resource {
	for _, f := range codeRules[req.Code].fields {
		v := req.Fields()[f.key]
		if v == "" && f.optional {
			continue
		}
		if f.kind == Topic {
			dst = append(dst, TopicRes(v, f.perm))
		} else {
			dst = append(dst, GroupRes(v, f.perm))
		}
	}
	return dst
}
