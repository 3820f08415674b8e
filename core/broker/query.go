package broker

import (
	"bytes"
	"math"
	"strconv"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// QUERY_MESSAGE (12) finds messages by key through the store's key index.
//
// Request header (RocketMQ's QueryMessageRequestHeader):
//
//	topic           the topic the messages were stored in
//	key             a key of their KEYS property, or their UNIQ_KEY
//	maxNum          how many to return (capped at maxQueryMessages)
//	beginTimestamp  store-time bounds in ms, both included
//	endTimestamp
//	_UNIQUE_KEY_QUERY  "true": key is a UNIQ_KEY (maxNum is then
//	                   defaultQueryMaxNum, as RocketMQ does)
//
// The response body is the stored records one after another, as a pull
// returns them; its header carries indexLastUpdateTimestamp and
// indexLastUpdatePhyoffset (the store time of the last indexed record and
// where indexed data ends). No match is QUERY_NOT_FOUND.

const (
	// maxQueryMessages caps a query's maxNum (RocketMQ's maxMsgsNumBatch).
	maxQueryMessages = 64
	// defaultQueryMaxNum is the maxNum of a unique-key query and of one
	// without maxNum (RocketMQ's defaultQueryMaxNum).
	defaultQueryMaxNum = 32
	// uniqueKeyQueryField is the extFields flag of a unique-key query
	// (RocketMQ's MixAll.UNIQUE_MSG_QUERY_FLAG).
	uniqueKeyQueryField = "_UNIQUE_KEY_QUERY"
)

func (b *Broker) handleQueryMessage(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic, key := req.Get("topic"), req.Get("key")
	maxNum, err := req.Int32Or("maxNum", defaultQueryMaxNum)
	if err != nil {
		return response(req, remoting.SystemError, "query message: %v", err)
	}
	begin, err := req.Int64Or("beginTimestamp", 0)
	if err != nil {
		return response(req, remoting.SystemError, "query message: %v", err)
	}
	end, err := req.Int64Or("endTimestamp", math.MaxInt64)
	if err != nil {
		return response(req, remoting.SystemError, "query message: %v", err)
	}
	if topic == "" || key == "" {
		return response(req, remoting.SystemError, "query message: topic and key are required")
	}
	if systemTopic(topic) || topic == TxnCheckMaxTopic {
		// The same rule as VIEW_MESSAGE_BY_ID: half messages, parked
		// delays and outbox events are the broker's own.
		return response(req, remoting.NoPermission, "query message: %s is reserved for the broker", topic)
	}
	unique := req.Get(uniqueKeyQueryField) == "true"
	if unique || maxNum <= 0 {
		maxNum = defaultQueryMaxNum
	}
	maxNum = min(maxNum, maxQueryMessages)
	offs, err := b.store.QueryByKey(topic, key, unique, begin, end, int(maxNum))
	if err != nil {
		return response(req, remoting.SystemError, "query message: %v", err)
	}
	var body []byte
	for _, off := range offs {
		r, err := b.store.ReadRecordAt(off)
		if err != nil {
			continue // deleted by retention since it was indexed, or corrupt
		}
		if string(r.Topic()) != topic || !recordHasKey(r, key, unique) {
			continue // a stale entry (see store.QueryByKey)
		}
		if len(body) > 0 && len(body)+len(r) > b.opts.PullMaxBytes {
			break
		}
		body = append(body, r...)
	}
	ts, phy := b.store.IndexLastUpdate()
	code, remark := int16(remoting.Success), ""
	if len(body) == 0 {
		code, remark = remoting.QueryNotFound, "no message found by key "+strconv.Quote(key)+" in "+topic+" within the time range"
	}
	resp := remoting.NewResponse(req, code, remark)
	resp.ExtFields = map[string]string{
		"indexLastUpdateTimestamp": strconv.FormatInt(ts, 10),
		"indexLastUpdatePhyoffset": strconv.FormatInt(phy, 10),
	}
	resp.Body = body
	return resp
}

// recordHasKey reports whether r's KEYS (or, with unique, its UNIQ_KEY)
// hold key.
func recordHasKey(r message.Record, key string, unique bool) bool {
	p := r.Properties()
	if unique {
		v, _ := p.Lookup(message.PropertyUniqKey)
		return string(v) == key
	}
	v, _ := p.Lookup(message.PropertyKeys)
	for _, k := range bytes.Split(v, []byte{' '}) {
		if string(k) == key {
			return true
		}
	}
	return false
}
