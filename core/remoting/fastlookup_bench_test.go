package remoting

import "testing"

// BenchmarkFastLookup measures finding a request's FastHandler, which
// every request does twice (decoding, then dispatching), with the
// broker's three send codes registered: a send, which has one, and a pull,
// which does not.
func BenchmarkFastLookup(b *testing.B) {
	s := &Server{}
	for _, code := range []int16{SendMessage, SendMessageV2, SendBatchMessage} {
		s.fast = append(s.fast, fastEntry{code, func(*Conn, *Command, func(*Command)) bool { return true }})
	}
	send, pull := &Command{Code: SendMessageV2}, &Command{Code: PullMessage}
	hits := 0
	for b.Loop() {
		if s.isFastRequest(send) {
			hits++
		}
		if s.isFastRequest(pull) {
			hits++
		}
	}
	if hits == 0 {
		b.Fatal("no send found")
	}
}
