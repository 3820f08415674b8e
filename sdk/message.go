package sdk

import (
	"unsafe"

	"github.com/rmq-go/rmq/sdk/abi"
)

// view returns b as a string without copying. The string is valid only as
// long as b's bytes are not reused.
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// Message is one message as a filter sees it. It is a view into the call's
// buffer: its strings and slices are valid only until Match returns, so keep
// a copy (strings.Clone, bytes.Clone) of anything needed later.
type Message struct {
	r abi.FilterRecord
	// resolved: r.Properties holds the values of names (a ValueFilter's
	// PropertyReader), read into vals and present. props is the
	// properties string Properties rebuilds from them, once built.
	resolved bool
	built    bool
	names    []string
	present  uint64
	vals     [abi.MaxFilterKeys][]byte
	props    []byte
}

// Value returns the value of the i-th key the matcher's PropertyKeys
// listed, resolved by the broker for a ValueFilter, and whether the message
// has that property (a key listed twice yields the same value twice). It
// reads nothing but the slot. For any other matcher, or an i out of range,
// it returns nil, false. The bytes alias the call's buffer: do not modify
// them.
func (m *Message) Value(i int) ([]byte, bool) {
	if !m.resolved || uint(i) >= uint(len(m.names)) {
		return nil, false
	}
	return m.vals[i], m.present&(1<<i) != 0
}

// Values returns every value Value returns, in one call: vals[i] is the
// value of the i-th listed key when bit i of present is set. Both are nil
// and 0 for a matcher whose values are not resolved.
func (m *Message) Values() (vals [][]byte, present uint64) {
	if !m.resolved {
		return nil, 0
	}
	return m.vals[:len(m.names)], m.present
}

// Topic returns the message's topic.
func (m *Message) Topic() string { return view(m.r.Topic) }

// Tags returns the TAGS property, or "".
func (m *Message) Tags() string { return view(m.r.Tags) }

// Keys returns the KEYS property (keys separated by spaces), or "".
func (m *Message) Keys() string { return view(m.r.Keys) }

// Properties returns the message's properties: for a PropertyReader only
// those it names, and for a ValueFilter's a string rebuilt from the
// resolved values (on first use per message, into a buffer the module
// reuses).
func (m *Message) Properties() Properties {
	if !m.resolved {
		return Properties(m.r.Properties)
	}
	if !m.built {
		m.props = m.props[:0]
		for i, k := range m.names {
			if m.present&(1<<i) != 0 {
				m.props = append(append(append(append(m.props, k...), nameSep), m.vals[i]...), valueSep)
			}
		}
		m.built = true
	}
	return Properties(m.props)
}

// Property returns the value of one property.
func (m *Message) Property(key string) (string, bool) {
	if m.resolved {
		for i, k := range m.names {
			if k == key {
				return view(m.vals[i]), m.present&(1<<i) != 0
			}
		}
		return "", false
	}
	return Properties(m.r.Properties).Lookup(key)
}

// HasBody reports whether the body was sent, which it is only to a filter
// that implements BodyFilter.
func (m *Message) HasBody() bool { return m.r.HasBody }

// Body returns the body, or nil if it was not sent: as stored
// (zlib-compressed if Compressed) for a BodyFilter, inflated by the broker
// for a BodyInflater (see there for a body it could not inflate). JSONField
// reads a field of it.
func (m *Message) Body() []byte { return m.r.Body }

// Compressed reports whether the body is zlib-compressed, as RocketMQ
// clients do for large bodies.
func (m *Message) Compressed() bool { return m.r.SysFlag&0x1 != 0 }

// QueueID returns the queue the message is stored in.
func (m *Message) QueueID() int32 { return m.r.QueueID }

// QueueOffset returns the message's offset in its queue.
func (m *Message) QueueOffset() int64 { return m.r.QueueOffset }

// BornTimestamp returns the producer's clock when sent, in ms.
func (m *Message) BornTimestamp() int64 { return m.r.BornTimestamp }

// StoreTimestamp returns the broker's clock when stored, in ms.
func (m *Message) StoreTimestamp() int64 { return m.r.StoreTimestamp }

// ReconsumeTimes returns how many times the message was delivered before.
func (m *Message) ReconsumeTimes() int32 { return m.r.ReconsumeTimes }

// SysFlag returns the stored SYSFLAG bits.
func (m *Message) SysFlag() int32 { return m.r.SysFlag }

// Properties is an encoded properties string (key 0x01 value 0x02 ...),
// read in place. Like Message, it is valid only during the call. It reads
// the format exactly as the broker's native filters do (a differential test
// in the broker's module holds the two readers to the same answers).
type Properties []byte

// Lookup returns the value of key without allocating. A key that appears
// twice yields its last value; pieces that are not one key and one value are
// ignored, as the clients ignore them.
func (p Properties) Lookup(key string) (string, bool) {
	v, ok := lookupProperty(p, key)
	return view(v), ok
}

// Get returns the value of key, or "".
func (p Properties) Get(key string) string {
	v, _ := p.Lookup(key)
	return v
}

// Each calls fn for each well-formed pair in order until fn returns false.
func (p Properties) Each(fn func(key, value string) bool) {
	for rest := []byte(p); len(rest) > 0; {
		var k, v []byte
		var ok bool
		k, v, rest, ok = nextProperty(rest)
		if ok && !fn(view(k), view(v)) {
			return
		}
	}
}
