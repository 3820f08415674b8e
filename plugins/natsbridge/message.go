package natsbridge

import (
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/rmq-go/rmq/core/outbox"
)

// Headers of a published event; doc.go has the table.
const (
	HeaderMsgID             = jetstream.MsgIDHeader // Nats-Msg-Id
	HeaderEvent             = "Rmq-Event"
	HeaderEventTime         = "Rmq-Event-Time"
	HeaderGroup             = "Rmq-Group"
	HeaderTopic             = "Rmq-Topic"
	HeaderRmqMsgID          = "Rmq-Msg-Id"
	HeaderOriginMsgID       = "Rmq-Origin-Msg-Id"
	HeaderKeys              = "Rmq-Keys"
	HeaderTags              = "Rmq-Tags"
	HeaderQueueID           = "Rmq-Queue-Id"
	HeaderQueueOffset       = "Rmq-Queue-Offset"
	HeaderReconsumeTimes    = "Rmq-Reconsume-Times"
	HeaderMaxReconsumeTimes = "Rmq-Max-Reconsume-Times"
	HeaderDelayLevel        = "Rmq-Delay-Level"
	HeaderNextAttemptAt     = "Rmq-Next-Attempt-At"
	HeaderReason            = "Rmq-Reason"
	HeaderBodyTruncated     = "Rmq-Body-Truncated"
	HeaderBodyMissing       = "Rmq-Body-Missing"
	HeaderPropPrefix        = "Rmq-Prop-"
)

// TimeFormat is the format of time headers: RFC 3339 in UTC with
// milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// maxHeaders is the most headers an event carries besides properties.
const maxHeaders = 20

// encoder turns events into NATS messages. It is used by the publishing
// goroutine only.
type encoder struct {
	subjBase  string // prefix.cluster.
	idPrefix  string // cluster-broker-epoch-
	stream    string // expected stream, or ""
	props     []string
	propNames []string // HeaderPropPrefix + props[i]
	bodyCap   int      // negative: no body
}

func newEncoder(o *Options, epoch string) *encoder {
	e := &encoder{
		subjBase: o.SubjectPrefix + "." + EscapeToken(o.Cluster) + ".",
		idPrefix: o.Cluster + "-" + o.Broker + "-" + epoch + "-",
		props:    o.Properties,
		bodyCap:  o.BodyCap,
	}
	if o.Mode == ModeJetStream {
		e.stream = o.Stream
	}
	for _, p := range o.Properties {
		e.propNames = append(e.propNames, HeaderPropPrefix+p)
	}
	return e
}

// msgID is the deterministic id of the event at an outbox offset.
func (e *encoder) msgID(off int64) string { return e.idPrefix + strconv.FormatInt(off, 10) }

// offsetOf recovers the outbox offset from a message this encoder built.
func (e *encoder) offsetOf(m *nats.Msg) (int64, bool) {
	id := m.Header[HeaderMsgID]
	if len(id) != 1 || !strings.HasPrefix(id[0], e.idPrefix) {
		return 0, false
	}
	off, err := strconv.ParseInt(id[0][len(e.idPrefix):], 10, 64)
	return off, err == nil
}

// subject returns the subject of ev.
func (e *encoder) subject(ev *outbox.Event) string {
	return e.subjBase + ev.Kind + "." + EscapeToken(ev.Group) + "." + EscapeToken(ev.Topic)
}

// message builds the NATS message of ev. maxPayload bounds headers and
// body together (the server's limit); zero means no bound.
func (e *encoder) message(ev *outbox.Event, maxPayload int) *nats.Msg {
	// One backing array for every header value instead of one small slice
	// per header.
	vals := make([]string, 0, maxHeaders+len(e.props))
	h := make(nats.Header, maxHeaders+len(e.props))
	set := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	setText := func(k, v string) {
		if v != "" {
			set(k, headerValue(v))
		}
	}
	set(HeaderMsgID, e.msgID(ev.Offset))
	if e.stream != "" {
		set(jetstream.ExpectedStreamHeader, e.stream)
	}
	set(HeaderEvent, ev.Kind)
	set(HeaderEventTime, ev.Time.UTC().Format(TimeFormat))
	setText(HeaderGroup, ev.Group)
	setText(HeaderTopic, ev.Topic)
	setText(HeaderRmqMsgID, ev.MsgID)
	setText(HeaderOriginMsgID, ev.OriginMsgID)
	setText(HeaderKeys, ev.Keys)
	setText(HeaderTags, ev.Tags)
	set(HeaderQueueID, strconv.FormatInt(int64(ev.QueueID), 10))
	set(HeaderQueueOffset, strconv.FormatInt(ev.QueueOffset, 10))
	set(HeaderReconsumeTimes, strconv.FormatInt(int64(ev.ReconsumeTimes), 10))
	set(HeaderMaxReconsumeTimes, strconv.FormatInt(int64(ev.MaxReconsumeTimes), 10))
	if ev.Kind == outbox.KindRetry {
		set(HeaderDelayLevel, strconv.FormatInt(int64(ev.DelayLevel), 10))
		if !ev.NextAttemptAt.IsZero() {
			set(HeaderNextAttemptAt, ev.NextAttemptAt.UTC().Format(TimeFormat))
		}
	}
	setText(HeaderReason, ev.Reason)
	for i, p := range e.props {
		if v, ok := ev.Properties.Lookup(p); ok {
			set(e.propNames[i], headerValue(string(v)))
		}
	}

	body := ev.Body
	limit := e.bodyCap
	if maxPayload > 0 {
		// Leave room for the headers; their exact encoded size is the
		// client's business, so estimate generously.
		room := maxPayload - headerSize(h) - 256
		if limit < 0 || room < limit {
			limit = max(room, 0)
		}
	}
	switch {
	case ev.Body == nil:
		set(HeaderBodyMissing, "true")
	case e.bodyCap < 0:
		body = nil
	case len(body) > limit:
		set(HeaderBodyTruncated, strconv.Itoa(len(body)))
		body = body[:limit]
	}
	return &nats.Msg{Subject: e.subject(ev), Header: h, Data: body}
}

// headerSize estimates the encoded size of h.
func headerSize(h nats.Header) int {
	n := 12 // NATS/1.0\r\n … \r\n
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// headerValue makes v safe as a header value: a line break would end the
// header, so control characters become spaces.
func headerValue(v string) string {
	if !strings.ContainsFunc(v, isControl) {
		return v
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return ' '
		}
		return r
	}, v)
}

func isControl(r rune) bool { return r < ' ' || r == 0x7f }
