package abi

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func sampleRecord(body bool) FilterRecord {
	r := FilterRecord{
		QueueID:        3,
		QueueOffset:    1 << 40,
		BornTimestamp:  1700000000000,
		StoreTimestamp: 1700000000001,
		ReconsumeTimes: 2,
		SysFlag:        1,
		Topic:          []byte("orders"),
		Tags:           []byte("TagA"),
		Keys:           []byte("k1 k2"),
		Properties:     []byte("TAGS\x01TagA\x02KEYS\x01k1 k2\x02"),
	}
	if body {
		r.Body, r.HasBody = []byte(`{"region":"eu"}`), true
	}
	return r
}

func TestFilterRoundTrip(t *testing.T) {
	in := AppendFilterHeader(nil, "region=eu")
	recs := []FilterRecord{sampleRecord(true), sampleRecord(false), {}}
	for i := range recs {
		if n := recs[i].EncodedLen(); n < 0 {
			t.Fatalf("record %d: EncodedLen = %d", i, n)
		}
		before := len(in)
		in = AppendFilterRecord(in, &recs[i])
		if got := len(in) - before; got != recs[i].EncodedLen() {
			t.Fatalf("record %d: wrote %d bytes, EncodedLen %d", i, got, recs[i].EncodedLen())
		}
	}
	expr, rest, err := ReadFilterHeader(in)
	if err != nil || string(expr) != "region=eu" {
		t.Fatalf("header: %q, %v", expr, err)
	}
	for i, want := range recs {
		var got FilterRecord
		rest, err = ReadFilterRecord(rest, &got)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if !sameRecord(got, want) {
			t.Fatalf("record %d: got %+v, want %+v", i, got, want)
		}
	}
	if len(rest) != 0 {
		t.Fatalf("%d bytes left", len(rest))
	}
}

func sameRecord(a, b FilterRecord) bool {
	return a.QueueID == b.QueueID && a.QueueOffset == b.QueueOffset && a.BornTimestamp == b.BornTimestamp &&
		a.StoreTimestamp == b.StoreTimestamp && a.ReconsumeTimes == b.ReconsumeTimes && a.SysFlag == b.SysFlag &&
		bytes.Equal(a.Topic, b.Topic) && bytes.Equal(a.Tags, b.Tags) && bytes.Equal(a.Keys, b.Keys) &&
		bytes.Equal(a.Properties, b.Properties) && bytes.Equal(a.Body, b.Body) && a.HasBody == b.HasBody
}

func TestFilterRecordTooLong(t *testing.T) {
	r := FilterRecord{Properties: make([]byte, 1<<16)}
	if n := r.EncodedLen(); n != -1 {
		t.Fatalf("EncodedLen = %d, want -1", n)
	}
}

func TestFilterRecordRejects(t *testing.T) {
	r := sampleRecord(true)
	b := AppendFilterRecord(nil, &r)
	var got FilterRecord
	for cut := 0; cut < len(b); cut++ {
		if _, err := ReadFilterRecord(b[:cut], &got); !errors.Is(err, ErrLayout) {
			t.Fatalf("cut at %d: err = %v", cut, err)
		}
	}
	bad := bytes.Clone(b)
	bad[frTopicLen]++ // lengths no longer add up to n
	if _, err := ReadFilterRecord(bad, &got); !errors.Is(err, ErrLayout) {
		t.Fatalf("inconsistent lengths: err = %v", err)
	}
	if _, _, err := ReadFilterHeader([]byte{0xff, 0xff, 0, 0}); !errors.Is(err, ErrLayout) {
		t.Fatalf("oversized expression: err = %v", err)
	}
}

func TestTxnRoundTrip(t *testing.T) {
	msgs := []HalfMessage{
		{CheckTimes: 4, BornTimestamp: 10, StoreTimestamp: 11, ProducerGroup: []byte("pg"), Topic: []byte("t"),
			MsgID: []byte("ID1"), Properties: []byte("a\x01b\x02")},
		{},
	}
	in := AppendTxnHeader(nil, 12345)
	for i := range msgs {
		in = AppendHalfMessage(in, &msgs[i])
	}
	now, rest, err := ReadTxnHeader(in)
	if err != nil || now != 12345 {
		t.Fatalf("header: %d, %v", now, err)
	}
	for i, want := range msgs {
		var got HalfMessage
		if rest, err = ReadHalfMessage(rest, &got); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if got.CheckTimes != want.CheckTimes || got.BornTimestamp != want.BornTimestamp ||
			got.StoreTimestamp != want.StoreTimestamp || !bytes.Equal(got.ProducerGroup, want.ProducerGroup) ||
			!bytes.Equal(got.Topic, want.Topic) || !bytes.Equal(got.MsgID, want.MsgID) ||
			!bytes.Equal(got.Properties, want.Properties) {
			t.Fatalf("message %d: got %+v, want %+v", i, got, want)
		}
	}
	out := make([]byte, 2*TxnResultLen)
	PutTxnResult(out, 1, TxnWait, 5000)
	if a, w := ReadTxnResult(out, 1); a != TxnWait || w != 5000 {
		t.Fatalf("result: %v %v", a, w)
	}
	if a, _ := ReadTxnResult(out, 0); a != TxnUnset {
		t.Fatalf("unwritten result: %v", a)
	}
}

func TestAllocateRoundTrip(t *testing.T) {
	req := AllocateRequest{
		Group:    "g",
		ClientID: "c2",
		Clients:  []string{"c1", "c2"},
		Queues:   []Queue{{"t", "b1", 0}, {"t", "b1", 1}, {"t", "b2", 0}},
	}
	b, err := AppendAllocateRequest(nil, &req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadAllocateRequest(b)
	if err != nil || !reflect.DeepEqual(got, req) {
		t.Fatalf("got %+v, %v", got, err)
	}
	for cut := 0; cut < len(b); cut++ {
		if _, err := ReadAllocateRequest(b[:cut]); !errors.Is(err, ErrLayout) {
			t.Fatalf("cut at %d: err = %v", cut, err)
		}
	}
	if _, err := AppendAllocateRequest(nil, &AllocateRequest{Group: string(make([]byte, 1<<16))}); !errors.Is(err, ErrLayout) {
		t.Fatalf("long group: err = %v", err)
	}
}

func TestInfoAndVectors(t *testing.T) {
	info := Info{Version: Version, Minor: 7, Kinds: KindFilter | KindTxnCheck, Flags: FlagFilterBody, PluginVersion: "1.2.3"}
	got, err := ReadInfo(append(AppendInfo(nil, info), "future fields"...))
	if err != nil || got != info {
		t.Fatalf("info: %+v, %v", got, err)
	}
	// A block that ends at the label, as guests built before the minor
	// field write it, reads as minor 0.
	old := AppendInfo(nil, info)
	info.Minor = 0
	if got, err := ReadInfo(old[:len(old)-2]); err != nil || got != info {
		t.Fatalf("info without a minor: %+v, %v", got, err)
	}
	vs := []Vector{{Kind: KindFilter, Count: 1, In: []byte("in"), Out: []byte{FilterMatch}}, {Kind: KindAllocate}}
	blob := AppendVectorCount(nil, len(vs))
	for i := range vs {
		blob = AppendVector(blob, &vs[i])
	}
	back, err := ReadVectors(blob)
	if err != nil || len(back) != 2 || string(back[0].In) != "in" || back[0].Out[0] != FilterMatch || back[1].Kind != KindAllocate {
		t.Fatalf("vectors: %+v, %v", back, err)
	}
	if _, err := ReadVectors(blob[:len(blob)-1]); !errors.Is(err, ErrLayout) {
		t.Fatalf("short blob: err = %v", err)
	}
}

func TestPackAndErrors(t *testing.T) {
	v := PackPtrLen(1<<31-8, 77)
	if v < 0 {
		t.Fatal("packed value is negative")
	}
	if p, n := UnpackPtrLen(v); p != 1<<31-8 || n != 77 {
		t.Fatalf("unpacked %d %d", p, n)
	}
	buf := make([]byte, 16)
	PutError(buf, "a long message that does not fit")
	if got := ReadError(buf); got != "a long messa" {
		t.Fatalf("ReadError = %q", got)
	}
	if OutOffset(9) != 16 || OutOffset(16) != 16 {
		t.Fatal("OutOffset does not round to 8")
	}
	if StatusBadExpression.String() != "bad expression" || Status(99).String() != "unknown status" {
		t.Fatal("status names")
	}
}

func TestKeyList(t *testing.T) {
	b, err := AppendKeyList(nil, []string{"a", "", "region"})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := ReadKeyList(b)
	if err != nil || !reflect.DeepEqual(keys, []string{"a", "", "region"}) {
		t.Fatalf("keys %q, %v", keys, err)
	}
	for cut := 0; cut < len(b); cut++ {
		if _, err := ReadKeyList(b[:cut]); !errors.Is(err, ErrLayout) {
			t.Fatalf("cut at %d: %v", cut, err)
		}
	}
	if _, err := AppendKeyList(nil, make([]string, MaxFilterKeys+1)); !errors.Is(err, ErrLayout) {
		t.Fatal("too many keys accepted")
	}
}

// TestTransformExpectation round-trips the expectations of each kind and
// refuses a truncated one.
func TestTransformExpectation(t *testing.T) {
	for _, e := range []TransformExpectation{
		{Name: "pass"},
		{Name: "change", Result: &TransformResult{Action: TransformChange, Topic: []byte("T2"), Properties: []byte("a\x011\x02"), Body: []byte{}, Reason: []byte{}}},
		{Name: "reject", Result: &TransformResult{Action: TransformReject, Reason: []byte("why")}},
	} {
		b := AppendTransformExpectation(nil, &e)
		got, err := ReadTransformExpectation(b)
		if err != nil || got.Name != e.Name || (got.Result == nil) != (e.Result == nil) {
			t.Fatalf("%s: %+v, %v", e.Name, got, err)
		}
		if e.Result != nil && (got.Result.Action != e.Result.Action || string(got.Result.Topic) != string(e.Result.Topic) ||
			string(got.Result.Properties) != string(e.Result.Properties) || (got.Result.Body == nil) != (e.Result.Body == nil) ||
			string(got.Result.Reason) != string(e.Result.Reason)) {
			t.Fatalf("%s: %+v", e.Name, got.Result)
		}
		for n := range len(b) {
			// Cut right after the name it reads as a pass; anywhere else it
			// does not read.
			if _, err := ReadTransformExpectation(b[:n]); (err == nil) != (n == 2+len(e.Name)) {
				t.Errorf("%s cut to %d bytes: %v", e.Name, n, err)
			}
		}
	}
	// Properties compare as a set; a later value of a key wins.
	in := TransformRecord{Topic: []byte("T"), Properties: []byte("a\x011\x02b\x012\x02")}
	e := TransformExpectation{Result: &TransformResult{Action: TransformChange, Properties: []byte("b\x012\x02a\x011\x02")}}
	if err := e.Check(&in, nil); err != nil {
		t.Errorf("reordered properties: %v", err)
	}
	if err := e.Check(&in, &TransformResult{Action: TransformChange, Properties: []byte("a\x010\x02b\x012\x02a\x011\x02")}); err != nil {
		t.Errorf("a repeated key: %v", err)
	}
}
