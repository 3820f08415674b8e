package broker

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/rmq-go/rmq/core/remoting"
)

// Connection lists for operators: GET_CONSUMER_CONNECTION_LIST and
// GET_PRODUCER_CONNECTION_LIST (mqadmin consumerConnection,
// producerConnection). An answer lists the group's members, one per client
// instance with a live connection, so it is bounded by the server's
// connection limit (MaxConns), and its subscriptions, bounded by
// MaxSubscriptionsPerGroup.

// connectionLocked describes a member's connection.
func (m *member) connectionLocked() remoting.Connection {
	c := remoting.Connection{ClientID: m.clientID, Language: m.language, Version: m.version}
	if m.conn != nil && m.conn.RemoteAddr() != nil {
		c.ClientAddr = m.conn.RemoteAddr().String()
	}
	return c
}

// subscriptionData is a subscription as RocketMQ's SubscriptionData
// writes it, with a TAG expression's tags. The tags' hash codes are left
// out: RocketMQ writes them as numbers and no tool reads them.
func (s *subscription) subscriptionData() remoting.SubscriptionData {
	sd := remoting.SubscriptionData{Topic: s.topic, SubString: s.expr, SubVersion: s.version, ExpressionType: s.typ,
		TagsSet: []string{}, CodeSet: []string{}}
	if s.typ == ExpressionTag && s.expr != "" && s.expr != "*" {
		for _, tag := range strings.Split(s.expr, "||") {
			if tag = strings.TrimSpace(tag); tag != "" {
				sd.TagsSet = append(sd.TagsSet, tag)
			}
		}
	}
	return sd
}

// consumerConnection returns a consumer group's connection list, false
// when no member of the group is online.
func (t *clientTable) consumerConnection(group string) (remoting.ConsumerConnection, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.consumers[group]
	if g == nil || len(g.members) == 0 {
		return remoting.ConsumerConnection{}, false
	}
	cc := remoting.ConsumerConnection{ConsumeType: g.consumeType, MessageModel: g.model, ConsumeFromWhere: g.fromWhere,
		SubscriptionTable: make(map[string]remoting.SubscriptionData, len(g.subs))}
	for _, m := range g.members {
		cc.ConnectionSet = append(cc.ConnectionSet, m.connectionLocked())
	}
	for topic, s := range g.subs {
		cc.SubscriptionTable[topic] = s.subscriptionData()
	}
	sortConnections(cc.ConnectionSet)
	return cc, true
}

// producerConnection returns a producer group's connection list, false
// when no member of the group is online.
func (t *clientTable) producerConnection(group string) (remoting.ProducerConnection, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var pc remoting.ProducerConnection
	for _, m := range t.producers[group] {
		pc.ConnectionSet = append(pc.ConnectionSet, m.connectionLocked())
	}
	sortConnections(pc.ConnectionSet)
	return pc, len(pc.ConnectionSet) > 0
}

func sortConnections(cs []remoting.Connection) {
	slices.SortFunc(cs, func(a, b remoting.Connection) int { return strings.Compare(a.ClientID, b.ClientID) })
}

func (b *Broker) handleConsumerConnections(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Get("consumerGroup")
	cc, ok := b.clients.consumerConnection(group)
	if !ok {
		return response(req, remoting.ConsumerNotOnline, "the consumer group %s is not online", logName(group))
	}
	body, _ := json.Marshal(cc)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

func (b *Broker) handleProducerConnections(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	group := req.Get("producerGroup")
	pc, ok := b.clients.producerConnection(group)
	if !ok {
		// RocketMQ answers SYSTEM_ERROR here: there is no "producer not
		// online" code.
		return response(req, remoting.SystemError, "the producer group %s is not online", logName(group))
	}
	body, _ := json.Marshal(pc)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}
