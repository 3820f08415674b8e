package message

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestPropertiesRoundTrip(t *testing.T) {
	m := map[string]string{"TAGS": "TagA", "UNIQ_KEY": "ABC", "a": "1", "empty": ""}
	p := EncodeProperties(m)
	if got, want := string(p), "TAGS\x01TagA\x02UNIQ_KEY\x01ABC\x02a\x011\x02"; got != want {
		t.Fatalf("encoded %q, want %q", got, want)
	}
	if v, ok := p.Lookup("a"); !ok || string(v) != "1" {
		t.Fatalf("Lookup(a) = %q, %v", v, ok)
	}
	if p.Has("empty") || p.Has("missing") {
		t.Fatal("absent keys reported present")
	}
	back := p.Map()
	if len(back) != 3 || back["TAGS"] != "TagA" {
		t.Fatalf("Map() = %v", back)
	}
	q := p.With("a", "2").Without("UNIQ_KEY")
	if q.Get("a") != "2" || q.Has("UNIQ_KEY") || q.Get("TAGS") != "TagA" {
		t.Fatalf("With/Without gave %q", q)
	}
	if p.Get("a") != "1" {
		t.Fatal("With modified its receiver")
	}
}

func TestPropertiesIgnoresBadPieces(t *testing.T) {
	p := Properties("a\x011\x02junk\x02b\x01x\x01y\x02c\x013")
	got := p.Map()
	if len(got) != 2 || got["a"] != "1" || got["c"] != "3" {
		t.Fatalf("Map() = %v", got)
	}
}

func TestPropertiesLookupDoesNotAllocate(t *testing.T) {
	p := EncodeProperties(map[string]string{"a": "1", "b": "2", "color": "red", "TAGS": "x"})
	n := testing.AllocsPerRun(100, func() {
		if _, ok := p.Lookup("color"); !ok {
			t.Fatal("missing")
		}
	})
	if n != 0 {
		t.Fatalf("Lookup allocated %v times", n)
	}
}

func TestAppendProperty(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "CLUSTER\x01c\x02"},
		{"a\x011\x02", "a\x011\x02CLUSTER\x01c\x02"},
		{"a\x011", "a\x011\x02CLUSTER\x01c\x02"}, // the last separator left off
		{"CLUSTER\x01old\x02", "CLUSTER\x01old\x02CLUSTER\x01c\x02"},
	}
	for _, c := range cases {
		p := AppendProperty(Properties(c.in), PropertyCluster, "c")
		if string(p) != c.want {
			t.Errorf("AppendProperty(%q) = %q, want %q", c.in, p, c.want)
		}
		if p.Get(PropertyCluster) != "c" {
			t.Errorf("AppendProperty(%q): CLUSTER reads %q", c.in, p.Get(PropertyCluster))
		}
	}
	buf := make(Properties, 0, 64)
	if n := testing.AllocsPerRun(100, func() { _ = AppendProperty(append(buf[:0], "a\x011"...), "k", "v") }); n != 0 {
		t.Fatalf("AppendProperty into a sized buffer allocated %v times", n)
	}
}

func sampleMessage(v6 bool) *Message {
	born := netip.MustParseAddrPort("10.1.2.3:5555")
	store := netip.MustParseAddrPort("127.0.0.1:10911")
	if v6 {
		born = netip.MustParseAddrPort("[2001:db8::1]:5555")
		store = netip.MustParseAddrPort("[::1]:10911")
	}
	return &Message{
		QueueID:                   3,
		Flag:                      7,
		QueueOffset:               42,
		CommitLogOffset:           1234,
		SysFlag:                   SysFlagCompressed,
		BornTimestamp:             1700000000000,
		BornHost:                  born,
		StoreTimestamp:            1700000000123,
		StoreHost:                 store,
		ReconsumeTimes:            2,
		PreparedTransactionOffset: 99,
		Body:                      []byte("hello world"),
		Topic:                     "TopicTest",
		Properties:                EncodeProperties(map[string]string{"TAGS": "TagA", "KEYS": "k1 k2"}),
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		in := sampleMessage(v6)
		b, err := AppendRecord(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != in.RecordLen() {
			t.Fatalf("v6=%v: encoded %d bytes, RecordLen says %d", v6, len(b), in.RecordLen())
		}
		r := Record(b)
		if err := r.Validate(); err != nil {
			t.Fatalf("v6=%v: %v", v6, err)
		}
		if !r.CheckBodyCRC() {
			t.Fatal("body CRC mismatch")
		}
		var out Message
		r.Decode(&out)
		in.BodyCRC = BodyCRC(in.Body)
		if v6 {
			in.SysFlag |= SysFlagBornHostV6 | SysFlagStoreHostV6
		}
		if out.Topic != in.Topic || !bytes.Equal(out.Body, in.Body) || !bytes.Equal(out.Properties, in.Properties) ||
			out.BornHost != in.BornHost || out.StoreHost != in.StoreHost || out.SysFlag != in.SysFlag ||
			out.QueueOffset != in.QueueOffset || out.CommitLogOffset != in.CommitLogOffset ||
			out.StoreTimestamp != in.StoreTimestamp || out.ReconsumeTimes != in.ReconsumeTimes ||
			out.PreparedTransactionOffset != in.PreparedTransactionOffset || out.BodyCRC != in.BodyCRC {
			t.Fatalf("v6=%v: decoded %+v, want %+v", v6, out, *in)
		}
		r.SetQueueOffset(7)
		r.SetCommitLogOffset(8)
		r.SetStoreTimestamp(9)
		if r.QueueOffset() != 7 || r.CommitLogOffset() != 8 || r.StoreTimestamp() != 9 || r.Validate() != nil {
			t.Fatal("in-place setters broke the record")
		}
	}
}

func TestRecordRejectsOversize(t *testing.T) {
	m := sampleMessage(false)
	m.Topic = string(bytes.Repeat([]byte("t"), 128))
	if _, err := AppendRecord(nil, m); !errors.Is(err, ErrTopicTooLong) {
		t.Fatalf("err = %v", err)
	}
	m = sampleMessage(false)
	m.Properties = make(Properties, MaxPropertiesLen+1)
	if _, err := AppendRecord(nil, m); !errors.Is(err, ErrPropertiesTooLong) {
		t.Fatalf("err = %v", err)
	}
}

func TestDecodeRecords(t *testing.T) {
	var buf []byte
	for i := 0; i < 3; i++ {
		m := sampleMessage(i == 1)
		m.QueueOffset = int64(i)
		buf, _ = AppendRecord(buf, m)
	}
	rs, err := DecodeRecords(buf)
	if err != nil || len(rs) != 3 {
		t.Fatalf("DecodeRecords: %d records, %v", len(rs), err)
	}
	for i, r := range rs {
		if r.QueueOffset() != int64(i) {
			t.Fatalf("record %d has queue offset %d", i, r.QueueOffset())
		}
	}
	buf[len(buf)-1] ^= 0xFF
	if _, err := DecodeRecords(buf[:len(buf)-3]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("truncated run: err = %v", err)
	}
}

func TestBatchRoundTrip(t *testing.T) {
	var body []byte
	for i, s := range []string{"one", "", "three"} {
		var err error
		body, err = AppendBatchEntry(body, BatchEntry{Flag: int32(i), Body: []byte(s),
			Properties: EncodeProperties(map[string]string{"i": s + "x"})})
		if err != nil {
			t.Fatal(err)
		}
	}
	es, err := DecodeBatch(body)
	if err != nil || len(es) != 3 {
		t.Fatalf("DecodeBatch: %d, %v", len(es), err)
	}
	if string(es[2].Body) != "three" || es[2].Flag != 2 || es[2].Properties.Get("i") != "threex" || len(es[1].Body) != 0 {
		t.Fatalf("entries %+v", es)
	}
	for _, bad := range [][]byte{nil, body[:len(body)-1], append(append([]byte{}, body...), 0)} {
		if _, err := DecodeBatch(bad); !errors.Is(err, ErrMalformed) {
			t.Fatalf("bad batch of %d bytes: err = %v", len(bad), err)
		}
	}
}

func TestOffsetMsgID(t *testing.T) {
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	id := OffsetMsgID(host, 1234)
	if id != "7F00000100002A9F00000000000004D2" {
		t.Fatalf("id = %s", id)
	}
	h, off, err := ParseOffsetMsgID(id)
	if err != nil || h != host || off != 1234 {
		t.Fatalf("parse: %v %d %v", h, off, err)
	}
	v6 := netip.MustParseAddrPort("[2001:db8::1]:9")
	h, off, err = ParseOffsetMsgID(OffsetMsgID(v6, 5))
	if err != nil || h != v6 || off != 5 {
		t.Fatalf("v6 parse: %v %d %v", h, off, err)
	}
	for _, bad := range []string{"", "XYZ", "7F00000100002A9F00000000000004D", "ZZ00000100002A9F00000000000004D2"} {
		if _, _, err := ParseOffsetMsgID(bad); err == nil {
			t.Fatalf("ParseOffsetMsgID(%q) accepted", bad)
		}
	}
}

func TestNewUniqID(t *testing.T) {
	before := time.Now()
	a, b := NewUniqID(), NewUniqID()
	if len(a) != 32 || a == b {
		t.Fatalf("ids %q %q", a, b)
	}
	for _, id := range []string{a, b} {
		raw, err := hex.DecodeString(id)
		if err != nil || strings.ToUpper(id) != id || id[:20] != a[:20] {
			t.Fatalf("id %q: not uppercase hex with the process's prefix of %q (%v)", id, a[:20], err)
		}
		// Bytes 10..13 count milliseconds since the start of the local month.
		month := time.Date(before.Year(), before.Month(), 1, 0, 0, 0, 0, before.Location())
		got := month.Add(time.Duration(binary.BigEndian.Uint32(raw[10:14])) * time.Millisecond)
		if got.Before(before.Add(-time.Millisecond)) || got.After(time.Now()) {
			t.Fatalf("id %q: time %v, want between %v and now", id, got, before)
		}
	}
	if c1, c2 := binary.BigEndian.Uint16([]byte(mustHex(t, a)[14:])), binary.BigEndian.Uint16([]byte(mustHex(t, b)[14:])); c2 != c1+1 {
		t.Fatalf("counters %d then %d", c1, c2)
	}
}

func mustHex(t *testing.T, s string) string {
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func BenchmarkNewUniqID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = NewUniqID()
	}
}

func TestTagHash(t *testing.T) {
	// Values of Java's "TagA".hashCode() and friends.
	cases := map[string]int64{"": 0, "TagA": 2598919, "a": 97, "héllo": 103094734, "😀": 1772899}
	for tag, want := range cases {
		if got := TagHash(tag); got != want {
			t.Errorf("TagHash(%q) = %d, want %d", tag, got, want)
		}
		if got := TagHashBytes([]byte(tag)); got != want {
			t.Errorf("TagHashBytes(%q) = %d, want %d", tag, got, want)
		}
	}
}
