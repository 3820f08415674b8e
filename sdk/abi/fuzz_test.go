package abi

import "testing"

func FuzzReadFilterRecord(f *testing.F) {
	r := sampleRecord(true)
	f.Add(AppendFilterRecord(AppendFilterHeader(nil, "x"), &r))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, rest, err := ReadFilterHeader(b)
		if err != nil {
			return
		}
		var r FilterRecord
		for len(rest) > 0 {
			next, err := ReadFilterRecord(rest, &r)
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

func FuzzReadHalfMessage(f *testing.F) {
	h := HalfMessage{ProducerGroup: []byte("pg"), Topic: []byte("t"), MsgID: []byte("id")}
	f.Add(AppendHalfMessage(AppendTxnHeader(nil, 1), &h))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, rest, err := ReadTxnHeader(b)
		if err != nil {
			return
		}
		var h HalfMessage
		for len(rest) > 0 {
			if rest, err = ReadHalfMessage(rest, &h); err != nil {
				return
			}
		}
	})
}

// FuzzPluginOutput covers the decoders the host runs on a guest's output.
func FuzzPluginOutput(f *testing.F) {
	f.Add(AppendInfo(nil, Info{Version: 1, PluginVersion: "v"}))
	f.Add(AppendVector(AppendVectorCount(nil, 1), &Vector{Kind: KindFilter, In: []byte("i"), Out: []byte("o")}))
	b, _ := AppendAllocateRequest(nil, &AllocateRequest{Group: "g", Clients: []string{"a"}, Queues: []Queue{{"t", "b", 1}}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ReadInfo(b)
		_, _ = ReadVectors(b)
		_, _ = ReadAllocateRequest(b)
		_ = ReadError(b)
		_, _ = ReadKeyList(b)
	})
}
