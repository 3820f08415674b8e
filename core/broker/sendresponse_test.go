package broker

import (
	"net/netip"
	"testing"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// TestSendResponseFields checks the answer to a stored send: the first
// message's queue and offset, and every message's offsetMsgId, comma
// separated, as the clients split them. It is built in two allocations,
// the response with its fields and their text.
func TestSendResponseFields(t *testing.T) {
	br := &Broker{}
	host := netip.MustParseAddrPort("127.0.0.1:10911")
	msgs := []*message.Message{
		{Topic: "T", QueueID: 3, QueueOffset: 123456, CommitLogOffset: 987654321, StoreHost: host},
		{Topic: "T", QueueID: 3, QueueOffset: 123457, CommitLogOffset: 987655321, StoreHost: host},
	}
	req := &remoting.Command{Code: remoting.SendMessage, Opaque: 42}
	for n := 1; n <= len(msgs); n++ {
		resp := br.sendResponse(req, msgs[:n])
		if resp.Code != remoting.Success || resp.Opaque != 42 || !resp.IsResponse() {
			t.Fatalf("response %+v", resp)
		}
		want := map[string]string{
			"msgId": message.OffsetMsgID(host, 987654321), "queueId": "3", "queueOffset": "123456",
			"MSG_REGION": "DefaultRegion", "TRACE_ON": "true",
		}
		if n == 2 {
			want["msgId"] += "," + message.OffsetMsgID(host, 987655321)
		}
		for k, v := range want {
			if got := resp.Get(k); got != v {
				t.Errorf("%d messages: %s = %q, want %q", n, k, got, v)
			}
		}
	}
	if raceEnabled {
		return // the race detector's instrumentation allocates
	}
	one := msgs[:1]
	if n := testing.AllocsPerRun(100, func() { _ = br.sendResponse(req, one) }); n > 2 {
		t.Errorf("sendResponse allocates %.0f times, want at most 2", n)
	}
}
