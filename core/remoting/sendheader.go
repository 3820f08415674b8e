package remoting

import (
	"errors"
	"strconv"
)

// SendHeader is the custom header (extFields) of SEND_MESSAGE,
// SEND_MESSAGE_V2, SEND_BATCH_MESSAGE, SEND_REPLY_MESSAGE and
// SEND_REPLY_MESSAGE_V2. SEND_MESSAGE and SEND_REPLY_MESSAGE spell their
// keys out; the others use one letter per key, a to n, in the order below
// (RocketMQ's SendMessageRequestHeaderV2). Numbers are decimal text,
// booleans "true" or "false".
//
//	+------------------------+-----+---------------------------------------+
//	| key                    | V2  | meaning                               |
//	+------------------------+-----+---------------------------------------+
//	| producerGroup          | a   | the sender's producer group           |
//	| topic                  | b   | the topic to store into               |
//	| defaultTopic           | c   | template of an auto-created topic     |
//	| defaultTopicQueueNums  | d   | queues of an auto-created topic       |
//	| queueId                | e   | the queue; absent or < 0: any         |
//	| sysFlag                | f   | message.SysFlag* bits                 |
//	| bornTimestamp          | g   | Unix ms when the producer made it     |
//	| flag                   | h   | the message's user flag               |
//	| properties             | i   | encoded properties (core/message)     |
//	| reconsumeTimes         | j   | deliveries so far (retry sends)       |
//	| unitMode               | k   | carried, unused                       |
//	| maxReconsumeTimes      | l   | the group's retry limit (retry sends) |
//	| batch                  | m   | the body is a batch                   |
//	| bname                  | n   | the broker the producer chose         |
//	+------------------------+-----+---------------------------------------+
type SendHeader struct {
	ProducerGroup         string
	Topic                 string
	DefaultTopic          string
	DefaultTopicQueueNums int32 // 4 when absent, as RocketMQ's clients default
	QueueID               int32 // -1 when absent
	SysFlag               int32
	BornTimestamp         int64
	Flag                  int32
	Properties            string
	ReconsumeTimes        int32
	UnitMode              bool
	MaxReconsumeTimes     int32 // 0 when absent: the group's own limit applies
	Batch                 bool  // always true for SEND_BATCH_MESSAGE
	BrokerName            string
}

// Field indices of sendHeaderKeys.
const (
	sendProducerGroup = iota
	sendTopic
	sendDefaultTopic
	sendDefaultTopicQueueNums
	sendQueueID
	sendSysFlag
	sendBornTimestamp
	sendFlag
	sendProperties
	sendReconsumeTimes
	sendUnitMode
	sendMaxReconsumeTimes
	sendBatch
	sendBrokerName
	sendFields
)

// sendHeaderKeys are the extFields keys of SendHeader: SEND_MESSAGE's
// first, SEND_MESSAGE_V2's second.
var sendHeaderKeys = [sendFields][2]string{
	sendProducerGroup:         {"producerGroup", "a"},
	sendTopic:                 {"topic", "b"},
	sendDefaultTopic:          {"defaultTopic", "c"},
	sendDefaultTopicQueueNums: {"defaultTopicQueueNums", "d"},
	sendQueueID:               {"queueId", "e"},
	sendSysFlag:               {"sysFlag", "f"},
	sendBornTimestamp:         {"bornTimestamp", "g"},
	sendFlag:                  {"flag", "h"},
	sendProperties:            {"properties", "i"},
	sendReconsumeTimes:        {"reconsumeTimes", "j"},
	sendUnitMode:              {"unitMode", "k"},
	sendMaxReconsumeTimes:     {"maxReconsumeTimes", "l"},
	sendBatch:                 {"batch", "m"},
	sendBrokerName:            {"bname", "n"},
}

// sendKeysV2 reports whether a send request of code uses one-letter keys.
func sendKeysV2(code int16) bool {
	return code == SendMessageV2 || code == SendBatchMessage || code == SendReplyMessageV2
}

// DecodeSendHeader reads the header of a SEND_MESSAGE or
// SEND_REPLY_MESSAGE (long keys), SEND_MESSAGE_V2, SEND_BATCH_MESSAGE or
// SEND_REPLY_MESSAGE_V2 (one-letter keys) request. Absent
// or empty fields take their defaults; a number that does not parse is an
// error wrapping ErrInvalidField that names its key, and every such field
// is reported. It does not allocate unless it fails.
func DecodeSendHeader(code int16, ext map[string]string) (SendHeader, error) {
	var d sendDecoder
	if sendKeysV2(code) {
		d.col = 1
	}
	for f := range d.vals {
		d.vals[f] = ext[sendHeaderKeys[f][d.col]]
	}
	return d.header(code)
}

// DecodeSendHeaderOf is DecodeSendHeader of req's code and extFields; a
// request decoded for a FastHandler is read without building its map.
func DecodeSendHeaderOf(req *Command) (SendHeader, error) {
	if !req.hasPairs() {
		return DecodeSendHeader(req.Code, req.ExtFields)
	}
	var d sendDecoder
	if sendKeysV2(req.Code) {
		d.col = 1
	}
	if req.lazyExt == "" {
		for i := 0; i+1 < len(req.rawExt); i += 2 {
			if f := sendField(req.rawExt[i], d.col); f >= 0 {
				d.vals[f] = req.rawExt[i+1] // a repeated key keeps its last value, as in a map
			}
		}
		return d.header(req.Code)
	}
	// The places of the pairs, read here rather than through pair, which
	// is not inlined.
	s := req.lazyExt
	for at := req.lazyAt; at+16 <= len(s); at += 16 {
		ks, ke := le32(s, at), le32(s, at+4)
		if f := sendField(s[ks:ke], d.col); f >= 0 {
			d.vals[f] = s[le32(s, at+8):le32(s, at+12)]
		}
	}
	return d.header(req.Code)
}

// sendField returns the field of key in column col of sendHeaderKeys, or
// -1. A switch, where a map lookup hashed every key of every send.
func sendField(key string, col int) int {
	if col == 1 {
		if len(key) == 1 && 'a' <= key[0] && key[0] <= 'n' {
			return int(key[0] - 'a')
		}
		return -1
	}
	switch key {
	case "producerGroup":
		return sendProducerGroup
	case "topic":
		return sendTopic
	case "defaultTopic":
		return sendDefaultTopic
	case "defaultTopicQueueNums":
		return sendDefaultTopicQueueNums
	case "queueId":
		return sendQueueID
	case "sysFlag":
		return sendSysFlag
	case "bornTimestamp":
		return sendBornTimestamp
	case "flag":
		return sendFlag
	case "properties":
		return sendProperties
	case "reconsumeTimes":
		return sendReconsumeTimes
	case "unitMode":
		return sendUnitMode
	case "maxReconsumeTimes":
		return sendMaxReconsumeTimes
	case "batch":
		return sendBatch
	case "bname":
		return sendBrokerName
	}
	return -1
}

// header builds the SendHeader of d's values.
func (d *sendDecoder) header(code int16) (SendHeader, error) {
	h := SendHeader{
		ProducerGroup:         d.str(sendProducerGroup),
		Topic:                 d.str(sendTopic),
		DefaultTopic:          d.str(sendDefaultTopic),
		DefaultTopicQueueNums: int32(d.num(sendDefaultTopicQueueNums, 32, 4)),
		QueueID:               int32(d.num(sendQueueID, 32, -1)),
		SysFlag:               int32(d.num(sendSysFlag, 32, 0)),
		BornTimestamp:         d.num(sendBornTimestamp, 64, 0),
		Flag:                  int32(d.num(sendFlag, 32, 0)),
		Properties:            d.str(sendProperties),
		ReconsumeTimes:        int32(d.num(sendReconsumeTimes, 32, 0)),
		UnitMode:              d.str(sendUnitMode) == "true",
		MaxReconsumeTimes:     int32(d.num(sendMaxReconsumeTimes, 32, 0)),
		Batch:                 d.str(sendBatch) == "true" || code == SendBatchMessage,
		BrokerName:            d.str(sendBrokerName),
	}
	if d.errs != nil {
		return h, errors.Join(d.errs...)
	}
	return h, nil
}

// sendDecoder holds the values of one column of sendHeaderKeys.
type sendDecoder struct {
	vals [sendFields]string
	col  int // 0 long keys, 1 one-letter keys
	errs []error
}

func (d *sendDecoder) str(field int) string { return d.vals[field] }

func (d *sendDecoder) num(field, bits int, def int64) int64 {
	v := d.str(field)
	if v == "" {
		return def
	}
	if n, ok := parseJSONInt(v, bits); ok {
		return n // plain digits, as clients write them
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		key := sendHeaderKeys[field][d.col]
		if d.col == 1 {
			key += " (" + sendHeaderKeys[field][0] + ")"
		}
		_, err = parseInt(key, v, bits)
		d.errs = append(d.errs, err)
		return def
	}
	return n
}

// ExtFields returns h as the extFields of a SEND_MESSAGE request, or with
// v2 of a SEND_MESSAGE_V2 or SEND_BATCH_MESSAGE one. Every field is
// written, so DecodeSendHeader reads h back whatever the defaults.
func (h *SendHeader) ExtFields(v2 bool) map[string]string {
	col := 0
	if v2 {
		col = 1
	}
	i32 := func(v int32) string { return strconv.FormatInt(int64(v), 10) }
	vals := [sendFields]string{
		sendProducerGroup:         h.ProducerGroup,
		sendTopic:                 h.Topic,
		sendDefaultTopic:          h.DefaultTopic,
		sendDefaultTopicQueueNums: i32(h.DefaultTopicQueueNums),
		sendQueueID:               i32(h.QueueID),
		sendSysFlag:               i32(h.SysFlag),
		sendBornTimestamp:         strconv.FormatInt(h.BornTimestamp, 10),
		sendFlag:                  i32(h.Flag),
		sendProperties:            h.Properties,
		sendReconsumeTimes:        i32(h.ReconsumeTimes),
		sendUnitMode:              strconv.FormatBool(h.UnitMode),
		sendMaxReconsumeTimes:     i32(h.MaxReconsumeTimes),
		sendBatch:                 strconv.FormatBool(h.Batch),
		sendBrokerName:            h.BrokerName,
	}
	m := make(map[string]string, sendFields)
	for i, v := range vals {
		m[sendHeaderKeys[i][col]] = v
	}
	return m
}
