package message

import (
	"encoding/base64"
	"strings"
	"testing"
)

// TestRecallHandleRocketMQFields decodes a handle the way RocketMQ's
// clients do (RecallMessageHandle.decodeHandle: padded URL base64, split
// at spaces, "v1" and at least four fields more, the third the broker to
// ask) and finds the message's topic, broker, due time and id there.
func TestRecallHandleRocketMQFields(t *testing.T) {
	h := RecallHandle{Topic: "Orders", Broker: "broker-b", Due: 1765000000123, MsgID: "7F00000100012A9F", Park: "rmq_sys_wheel_timer", Queue: 0, Offset: 9}
	raw, err := base64.URLEncoding.DecodeString(h.String())
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Split(string(raw), " ")
	if len(f) < 5 || f[0] != "v1" || f[1] != "Orders" || f[2] != "broker-b" || f[3] != "1765000000123" || f[4] != "7F00000100012A9F" {
		t.Fatalf("fields %q", f)
	}
	unpadded := strings.TrimRight(h.String(), "=")
	for _, s := range []string{h.String(), unpadded} {
		if got, err := ParseRecallHandle(s); err != nil || got != h {
			t.Fatalf("%q: %+v %v", s, got, err)
		}
	}
	// A handle of RocketMQ's own brokers has five fields: not ours.
	five := base64.URLEncoding.EncodeToString([]byte("v1 Orders broker-b 1765000000123 7F00000100012A9F"))
	if _, err := ParseRecallHandle(five); err == nil {
		t.Fatal("a five-field handle decoded")
	}
}
