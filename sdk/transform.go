package sdk

import (
	"fmt"
	"maps"
	"strings"

	"github.com/rmq-go/rmq/sdk/abi"
)

// Transform sees each message of the topics its config entry names before
// the broker stores it (ABI v1.2). Through m it may leave the message as it
// is, change its topic, properties (tags and keys among them) or body, or
// reject it, which refuses the whole send with the reason as the
// producer's error. An error returned is a failure of the plugin, not a
// rejection: the plugin's failure policy decides (reject the send, or store
// it as sent).
type Transform interface {
	Transform(m *TransformMessage) error
}

// TransformFunc adapts a function to Transform.
type TransformFunc func(m *TransformMessage) error

// Transform calls f.
func (f TransformFunc) Transform(m *TransformMessage) error { return f(m) }

// RegisterTransform makes t the module's transform. Call it from an init
// function. Registering a second one panics.
func RegisterTransform(t Transform) {
	if t == nil || state.transform != nil {
		panic("sdk: RegisterTransform called with nil or twice")
	}
	state.transform = t
}

// TransformMessage is the message a transform works on: what the producer
// sent, with the changes made so far. Like Message, what its getters return
// is valid only until Transform returns.
type TransformMessage struct {
	rec    abi.TransformRecord
	res    abi.TransformResult
	props  []byte // the edited properties, when res.Properties is set
	reject bool
}

// Topic returns the topic the message goes to.
func (m *TransformMessage) Topic() string {
	if m.res.Topic != nil {
		return view(m.res.Topic)
	}
	return view(m.rec.Topic)
}

// Properties returns the message's properties.
func (m *TransformMessage) Properties() Properties {
	if m.res.Properties != nil {
		return Properties(m.res.Properties)
	}
	return Properties(m.rec.Properties)
}

// Property returns the value of a property and whether it is set.
func (m *TransformMessage) Property(key string) (string, bool) {
	return m.Properties().Lookup(key)
}

// Tags returns the message's tag (the TAGS property).
func (m *TransformMessage) Tags() string { return m.Properties().Get("TAGS") }

// Keys returns the message's keys (the KEYS property, space-separated).
func (m *TransformMessage) Keys() string { return m.Properties().Get("KEYS") }

// Body returns the message's body: inflated by the broker when the producer
// compressed it, unless Compressed reports it could not be.
func (m *TransformMessage) Body() []byte {
	if m.res.Body != nil {
		return m.res.Body
	}
	return m.rec.Body
}

// Compressed reports whether Body is still zlib-compressed (the broker
// could not inflate it within its bound).
func (m *TransformMessage) Compressed() bool { return m.res.Body == nil && m.rec.SysFlag&0x1 != 0 }

// JSONField reads one field of a JSON body, as LookupJSON does.
func (m *TransformMessage) JSONField(path ...string) (JSONValue, bool) {
	return LookupJSON(m.Body(), path...)
}

// SetTopic sends the message to another topic, which must exist on the
// broker and be writable; at most abi.MaxTopicLen bytes.
func (m *TransformMessage) SetTopic(topic string) {
	m.res.Topic = []byte(topic)
}

// SetProperty sets a property, replacing its value; an empty value removes
// it. A key or value holding the separators 0x01 or 0x02 is ignored.
func (m *TransformMessage) SetProperty(key, value string) {
	if key == "" || containsSep(key) || containsSep(value) {
		return
	}
	old := m.Properties()
	next := make([]byte, 0, len(old)+len(key)+len(value)+2)
	for rest := []byte(old); len(rest) > 0; {
		var k, v []byte
		var ok bool
		k, v, rest, ok = nextProperty(rest)
		if !ok || string(k) == key {
			continue
		}
		next = append(append(append(append(next, k...), nameSep), v...), valueSep)
	}
	if value != "" {
		next = append(append(append(append(next, key...), nameSep), value...), valueSep)
	}
	m.props, m.res.Properties = next, next
}

// DeleteProperty removes a property.
func (m *TransformMessage) DeleteProperty(key string) { m.SetProperty(key, "") }

// SetTags sets the message's tag.
func (m *TransformMessage) SetTags(tags string) { m.SetProperty("TAGS", tags) }

// SetKeys sets the message's keys (space-separated).
func (m *TransformMessage) SetKeys(keys string) { m.SetProperty("KEYS", keys) }

// SetBody replaces the message's body; the broker stores it uncompressed.
// The plugin may not modify b afterwards, within the call.
func (m *TransformMessage) SetBody(b []byte) {
	if b == nil {
		b = []byte{}
	}
	m.res.Body = b
}

// Reject refuses the send: the producer gets reason (cut to
// abi.MaxErrorLen bytes) in its error, and nothing of the send is stored.
func (m *TransformMessage) Reject(reason string) {
	if len(reason) > abi.MaxErrorLen {
		reason = reason[:abi.MaxErrorLen]
	}
	m.reject = true
	m.res.Reason = []byte(reason)
}

// Rejected reports whether Reject was called.
func (m *TransformMessage) Rejected() bool { return m.reject }

func containsSep(s string) bool {
	for i := range len(s) {
		if s[i] == nameSep || s[i] == valueSep {
			return true
		}
	}
	return false
}

// runTransform is broker_transform: it returns the result block (nil to
// pass the message unchanged).
func runTransform(in []byte) ([]byte, abi.Status) {
	if state.transform == nil {
		return nil, fail(abi.StatusNotImplemented, "this module registers no transform")
	}
	m := &state.tmsg
	*m = TransformMessage{props: m.props[:0]}
	if err := abi.ReadTransformRecord(in, &m.rec); err != nil {
		return nil, fail(abi.StatusBadInput, "transform record does not parse")
	}
	if err := state.transform.Transform(m); err != nil {
		return nil, fail(abi.StatusFailed, err.Error())
	}
	switch {
	case m.reject:
		state.tout = abi.AppendTransformResult(state.tout[:0], &abi.TransformResult{Action: abi.TransformReject, Reason: m.res.Reason})
	case m.res.Topic != nil || m.res.Properties != nil || m.res.Body != nil:
		if m.res.Topic != nil && (len(m.res.Topic) == 0 || len(m.res.Topic) > abi.MaxTopicLen) {
			return nil, fail(abi.StatusFailed, fmt.Sprintf("topic %q is not 1 to %d bytes", m.res.Topic, abi.MaxTopicLen))
		}
		m.res.Action = abi.TransformChange
		state.tout = abi.AppendTransformResult(state.tout[:0], &m.res)
	default:
		return nil, abi.StatusOK
	}
	return state.tout, abi.StatusOK
}

// TransformOutcome is what the registered transform did to a message, as
// TransformForTest reports it.
type TransformOutcome struct {
	Rejected   bool
	Reason     string
	Topic      string            // the topic it goes to
	Properties map[string]string // its properties after the transform
	Body       []byte            // its body after the transform
	Changed    bool              // whether anything but a reject was returned
}

// TransformForTest runs the registered transform over one message through
// the same code path the broker calls, in the current process, so a native
// go test can check a transform. Run InitForTest first if the transform
// reads its config.
func TransformForTest(topic string, properties map[string]string, body []byte) (TransformOutcome, error) {
	rec := abi.TransformRecord{Topic: []byte(topic), Properties: encodePropertyMap(properties), Body: body}
	in := abi.AppendTransformRecord(nil, &rec)
	buffer(abi.MaxErrorLen + 4)
	out, s := runTransform(in)
	if s != abi.StatusOK {
		return TransformOutcome{}, fmt.Errorf("%v: %s", s, abi.ReadError(state.buf))
	}
	o := TransformOutcome{Topic: topic, Properties: maps.Clone(properties), Body: body}
	if o.Properties == nil {
		o.Properties = map[string]string{}
	}
	if out == nil {
		return o, nil
	}
	r, err := abi.ReadTransformResult(out)
	if err != nil {
		return TransformOutcome{}, fmt.Errorf("result: %w", err)
	}
	if r.Action == abi.TransformReject {
		return TransformOutcome{Rejected: true, Reason: string(r.Reason)}, nil
	}
	o.Changed = true
	if r.Topic != nil {
		o.Topic = string(r.Topic)
	}
	if r.Properties != nil {
		o.Properties = map[string]string{}
		Properties(r.Properties).Each(func(k, v string) bool {
			o.Properties[strings.Clone(k)] = strings.Clone(v)
			return true
		})
	}
	if r.Body != nil {
		o.Body = append([]byte{}, r.Body...)
	}
	return o, nil
}
