package wasm_test

import (
	"testing"

	"github.com/rmq-go/rmq/sdk/abi"
)

// The fuzz targets of the ABI's decoders live here, in the host's module:
// the host runs them on what a guest hands it, and the sdk module keeps no
// fuzz corpus of its own.

func FuzzReadFilterRecord(f *testing.F) {
	r := abi.FilterRecord{
		QueueID: 3, QueueOffset: 1 << 40, SysFlag: 1,
		Topic: []byte("orders"), Tags: []byte("TagA"), Keys: []byte("k1 k2"),
		Properties: []byte("TAGS\x01TagA\x02KEYS\x01k1 k2\x02"),
		Body:       []byte(`{"region":"eu"}`), HasBody: true,
	}
	f.Add(abi.AppendFilterRecord(abi.AppendFilterHeader(nil, "x"), &r))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, rest, err := abi.ReadFilterHeader(b)
		if err != nil {
			return
		}
		var r abi.FilterRecord
		for len(rest) > 0 {
			next, err := abi.ReadFilterRecord(rest, &r)
			if err != nil {
				return
			}
			if n := r.EncodedLen(); n != len(rest)-len(next) {
				t.Fatalf("decoded record re-encodes to %d bytes, took %d", n, len(rest)-len(next))
			}
			rest = next
		}
	})
}

// FuzzReadFilterValues covers the resolved properties field of a filter
// record (abi.FlagFilterValues): what decodes re-encodes to the same bytes.
func FuzzReadFilterValues(f *testing.F) {
	var seed []byte
	seed, _ = abi.AppendFilterValue(seed, []byte("61"), true)
	seed, _ = abi.AppendFilterValue(seed, nil, false)
	seed, _ = abi.AppendFilterValue(seed, []byte{}, true)
	f.Add(seed, uint8(3))
	f.Add([]byte{0xFF, 0xFF, 0x01}, uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		vals := make([][]byte, int(n)%(abi.MaxFilterKeys+2))
		present, err := abi.ReadFilterValues(b, vals)
		if err != nil {
			return
		}
		var again []byte
		for i, v := range vals {
			if again, err = abi.AppendFilterValue(again, v, present&(1<<i) != 0); err != nil {
				t.Fatal(err)
			}
		}
		if string(again) != string(b) {
			t.Fatalf("%x decodes to values that encode to %x", b, again)
		}
	})
}

func FuzzReadHalfMessage(f *testing.F) {
	h := abi.HalfMessage{ProducerGroup: []byte("pg"), Topic: []byte("t"), MsgID: []byte("id")}
	f.Add(abi.AppendHalfMessage(abi.AppendTxnHeader(nil, 1), &h))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, rest, err := abi.ReadTxnHeader(b)
		if err != nil {
			return
		}
		var h abi.HalfMessage
		for len(rest) > 0 {
			if rest, err = abi.ReadHalfMessage(rest, &h); err != nil {
				return
			}
		}
	})
}

// FuzzPluginOutput covers the decoders the host runs on a guest's output.
func FuzzPluginOutput(f *testing.F) {
	f.Add(abi.AppendInfo(nil, abi.Info{Version: 1, PluginVersion: "v"}))
	f.Add(abi.AppendVector(abi.AppendVectorCount(nil, 1), &abi.Vector{Kind: abi.KindFilter, In: []byte("i"), Out: []byte("o")}))
	b, _ := abi.AppendAllocateRequest(nil, &abi.AllocateRequest{Group: "g", Clients: []string{"a"}, Queues: []abi.Queue{{Topic: "t", BrokerName: "b", QueueID: 1}}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = abi.ReadInfo(b)
		_, _ = abi.ReadVectors(b)
		_, _ = abi.ReadAllocateRequest(b)
		_ = abi.ReadError(b)
		_, _ = abi.ReadKeyList(b)
	})
}

func FuzzReadTransformResult(f *testing.F) {
	f.Add(abi.AppendTransformResult(nil, &abi.TransformResult{Action: abi.TransformChange,
		Topic: []byte("Audit"), Properties: []byte("TAGS\x01a\x02"), Body: []byte(`{"card":"****"}`)}))
	f.Add(abi.AppendTransformResult(nil, &abi.TransformResult{Action: abi.TransformReject, Reason: []byte("missing id")}))
	f.Add(abi.AppendTransformResult(nil, &abi.TransformResult{Action: abi.TransformChange, Body: []byte{}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := abi.ReadTransformResult(b)
		if err != nil {
			return
		}
		if r.Action != abi.TransformChange && r.Action != abi.TransformReject {
			t.Fatalf("accepted action %d", r.Action)
		}
		if len(r.Reason) > abi.MaxErrorLen || (r.Topic != nil && (len(r.Topic) == 0 || len(r.Topic) > abi.MaxTopicLen)) {
			t.Fatalf("accepted a result over the limits: %+v", r)
		}
		if r.Action == abi.TransformReject && (r.Topic != nil || r.Properties != nil || r.Body != nil) {
			t.Fatal("accepted a reject that changes the message")
		}
		if again := abi.AppendTransformResult(nil, &r); string(again) != string(b) {
			t.Fatalf("decoded result re-encodes to %x, was %x", again, b)
		}
	})
}

func FuzzReadTransformRecord(f *testing.F) {
	f.Add(abi.AppendTransformRecord(nil, &abi.TransformRecord{SysFlag: 1, Topic: []byte("Orders"),
		Properties: []byte("TAGS\x01a\x02"), Body: []byte(`{}`)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r abi.TransformRecord
		if err := abi.ReadTransformRecord(b, &r); err != nil {
			return
		}
		if again := abi.AppendTransformRecord(nil, &r); string(again) != string(b) {
			t.Fatalf("decoded record re-encodes to %x, was %x", again, b)
		}
	})
}
