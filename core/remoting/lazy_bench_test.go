package remoting

import "testing"

// BenchmarkSendDecode decodes a SEND_MESSAGE frame and reads its send
// header: through the extFields map (what a Handler gets) or from the
// unparsed pairs a FastHandler's request keeps.
func BenchmarkSendDecode(b *testing.B) {
	c := sendRequest(SerializeJSON)
	c.Body = nil
	frame, err := AppendFrame(nil, c)
	if err != nil {
		b.Fatal(err)
	}
	lazy := func(*Command) bool { return true }
	for _, v := range []struct {
		name string
		lazy func(*Command) bool
	}{{"ext=map", nil}, {"ext=pairs", lazy}} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var d Command
				if err := decodeFrame(frame[4:], &d, v.lazy); err != nil {
					b.Fatal(err)
				}
				if _, err := DecodeSendHeaderOf(&d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
