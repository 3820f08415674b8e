package remoting

import (
	"encoding/json"
	"testing"
)

// BenchmarkHeader measures one SEND_MESSAGE header (the Go client's keys and
// values) through each codec; codec=encoding-json is the baseline the
// purpose-built JSON scanner and writer replace.
func BenchmarkHeader(b *testing.B) {
	for _, st := range []struct {
		name string
		typ  byte
	}{{"json", SerializeJSON}, {"rocketmq", SerializeRocketMQ}} {
		c := sendRequest(st.typ)
		c.Body = nil
		frame, err := AppendFrame(nil, c)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("codec="+st.name+"/op=encode", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			buf := make([]byte, 0, 4096)
			for b.Loop() {
				buf, _ = AppendFrame(buf[:0], c)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/header")
		})
		b.Run("codec="+st.name+"/op=decode", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(frame)))
			for b.Loop() {
				var d Command
				if err := DecodeFrame(frame[4:], &d); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/header")
		})
	}

	h := stdHeader{Code: SendMessage, Language: "GO", Version: 317, Opaque: 12345, ExtFields: sendHeaderExt()}
	enc, _ := json.Marshal(&h)
	b.Run("codec=encoding-json/op=encode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		for b.Loop() {
			_, _ = json.Marshal(&h)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/header")
	})
	b.Run("codec=encoding-json/op=decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		for b.Loop() {
			var d stdHeader
			if err := json.Unmarshal(enc, &d); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/header")
	})
}
