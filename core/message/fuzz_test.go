package message

import (
	"bytes"
	"testing"
)

func FuzzProperties(f *testing.F) {
	f.Add([]byte("a\x011\x02b\x012\x02"))
	f.Add([]byte("\x01\x02\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := Properties(b)
		m := p.Map()
		// Whatever decodes must survive a round trip through the encoder.
		q := EncodeProperties(m)
		back := q.Map()
		for k, v := range m {
			if k == "" || v == "" {
				continue
			}
			if back[k] != v {
				t.Fatalf("key %q: %q after round trip, want %q", k, back[k], v)
			}
			if got, ok := p.Lookup(k); !ok || string(got) != v {
				t.Fatalf("Lookup(%q) = %q, %v; Map has %q", k, got, ok, v)
			}
		}
		// Appending a pair adds it and leaves every other pair as it was.
		r := AppendProperty(append(Properties(nil), p...), "\x03appended", "v")
		if got := r.Get("\x03appended"); got != "v" {
			t.Fatalf("appended pair reads %q", got)
		}
		for k, v := range m {
			if k != "\x03appended" && r.Get(k) != v {
				t.Fatalf("key %q: %q after AppendProperty, want %q", k, r.Get(k), v)
			}
		}
	})
}

func FuzzRecord(f *testing.F) {
	b, _ := AppendRecord(nil, sampleMessage(false))
	f.Add(b)
	b, _ = AppendRecord(nil, sampleMessage(true))
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := DecodeRecords(b)
		if err != nil {
			return
		}
		var out []byte
		for _, r := range rs {
			var m Message
			r.Decode(&m)
			_ = r.CheckBodyCRC()
			// Re-encoding a valid record yields the same bytes, except BODYCRC,
			// which the encoder recomputes, and host flags, which it derives.
			m.BodyCRC = r.BodyCRC()
			enc, err := AppendRecord(nil, &m)
			if err != nil {
				t.Fatalf("re-encode: %v", err)
			}
			var m2 Message
			Record(enc).Decode(&m2)
			if m2.Topic != m.Topic || !bytes.Equal(m2.Body, m.Body) || !bytes.Equal(m2.Properties, m.Properties) ||
				m2.QueueOffset != m.QueueOffset || m2.CommitLogOffset != m.CommitLogOffset ||
				m2.BornHost.Addr().Unmap() != m.BornHost.Addr().Unmap() || m2.StoreHost.Port() != m.StoreHost.Port() {
				t.Fatalf("re-encoded record decodes to %+v, want %+v", m2, m)
			}
			out = append(out, r...)
		}
		if !bytes.Equal(out, b) {
			t.Fatal("records do not cover the input")
		}
	})
}

func FuzzBatch(f *testing.F) {
	b, _ := AppendBatchEntry(nil, BatchEntry{Flag: 1, Body: []byte("x"), Properties: Properties("a\x01b\x02")})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		es, err := DecodeBatch(b)
		if err != nil {
			return
		}
		var out []byte
		for _, e := range es {
			out, _ = AppendBatchEntry(out, e)
		}
		if len(out) != len(b) {
			t.Fatalf("re-encoded %d bytes from %d", len(out), len(b))
		}
	})
}

func FuzzOffsetMsgID(f *testing.F) {
	f.Add("7F00000100002A9F00000000000004D2")
	f.Fuzz(func(t *testing.T, s string) {
		h, off, err := ParseOffsetMsgID(s)
		if err != nil {
			return
		}
		if h2, off2, err := ParseOffsetMsgID(OffsetMsgID(h, off)); err != nil || h2 != h || off2 != off {
			t.Fatalf("round trip of %q: %v %d %v", s, h2, off2, err)
		}
	})
}

// FuzzRecallHandle decodes arbitrary handles: a handle that decodes
// encodes to one that decodes to the same fields.
func FuzzRecallHandle(f *testing.F) {
	f.Add(RecallHandle{Topic: "T", Broker: "broker-a", Due: 1700000000000, MsgID: "7F0000010001", Park: "rmq_sys_wheel_timer", Queue: 0, Offset: 42}.String())
	f.Add("djEgVCBicm9rZXItYSAxIGlk") // RocketMQ's five fields: refused
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseRecallHandle(s)
		if err != nil {
			return
		}
		again, err := ParseRecallHandle(h.String())
		if err != nil || again != h {
			t.Fatalf("%q decoded to %+v, encoded and decoded again to %+v, %v", s, h, again, err)
		}
	})
}
