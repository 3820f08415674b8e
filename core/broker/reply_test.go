package broker_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestReplyPushHeader checks PUSH_REPLY_MESSAGE_TO_CLIENT field by field:
// a raw requester sends a request, a raw responder answers it with
// SEND_REPLY_MESSAGE_V2, and the requester's connection receives the reply
// with the header the official clients decode.
func TestReplyPushHeader(t *testing.T) {
	env := brokertest.Start(t)
	topic := brokertest.Name("RawRequest")
	createTopic(t, env, topic, 1)
	replyTopic := broker.ReplyTopic(broker.DefaultClusterName)

	pushed := make(chan *remoting.Command, 1)
	refuse := make(chan bool, 1)
	requester := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger(), OnRequest: func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
		if req.Code != remoting.PushReplyMessageToClient {
			return nil
		}
		if <-refuse {
			return remoting.NewResponse(req, remoting.SystemError, "no such request")
		}
		pushed <- req
		return remoting.NewResponse(req, remoting.Success, "")
	}})
	defer requester.Close()
	responder := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer responder.Close()

	// The request: an ordinary send that names its requester. No
	// heartbeat: the broker learns the connection from the request.
	reqProps := message.EncodeProperties(map[string]string{
		message.PropertyCorrelationID: "corr-7", message.PropertyReplyToClient: "raw-requester",
	})
	if r := invoke(t, requester, env, remoting.SendMessage, map[string]string{"producerGroup": "p", "topic": topic, "queueId": "0",
		"bornTimestamp": "1", "properties": string(reqProps)}, []byte("question")); r.Code != remoting.Success {
		t.Fatalf("request: %v", r)
	}

	replyProps := message.EncodeProperties(map[string]string{
		message.PropertyCorrelationID: "corr-7", message.PropertyReplyToClient: "raw-requester", message.PropertyMessageType: "reply",
	})
	reply := func() *remoting.Command {
		return invoke(t, responder, env, remoting.SendReplyMessageV2, map[string]string{"a": "responders", "b": replyTopic, "c": "TBW102",
			"d": "4", "e": "-1", "f": "0", "g": "1700000000123", "h": "5", "i": string(replyProps), "j": "0", "k": "false"}, []byte("answer"))
	}
	before := time.Now().UnixMilli()
	refuse <- false
	r := reply()
	if r.Code != remoting.Success || r.Get("queueId") != "0" || r.Get("queueOffset") != "0" || r.Get("msgId") == "" {
		t.Fatalf("reply: %v %v", r, r.Fields())
	}
	push := brokertest.Wait(t, pushed, 5*time.Second, "the pushed reply")
	if string(push.Body) != "answer" {
		t.Errorf("pushed body %q", push.Body)
	}
	want := map[string]string{"producerGroup": "responders", "topic": replyTopic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": "0", "bornTimestamp": "1700000000123", "flag": "5", "reconsumeTimes": "0", "unitMode": "false",
		"storeHost": env.BrokerAddr}
	for k, v := range want {
		if got := push.ExtFields[k]; got != v {
			t.Errorf("pushed %s = %q, want %q", k, got, v)
		}
	}
	if h := push.ExtFields["bornHost"]; !strings.HasPrefix(h, "127.0.0.1:") || h == env.BrokerAddr {
		t.Errorf("pushed bornHost %q, want the responder's address", h)
	}
	if ts, err := strconv.ParseInt(push.ExtFields["storeTimestamp"], 10, 64); err != nil || ts < before {
		t.Errorf("pushed storeTimestamp %q, want a time after %d", push.ExtFields["storeTimestamp"], before)
	}
	props := message.Properties(push.ExtFields["properties"])
	if props.Get(message.PropertyCorrelationID) != "corr-7" || props.Get(message.PropertyReplyToClient) != "raw-requester" ||
		props.Get(message.PropertyPushReplyTime) == "" || props.Get(message.PropertyCluster) != broker.DefaultClusterName {
		t.Errorf("pushed properties %v", props.Map())
	}

	// A requester that refuses the push: the reply is kept, the
	// responder told why.
	refuse <- true
	if r := reply(); r.Code != remoting.ConsumerNotOnline || !strings.Contains(r.Remark, "raw-requester refused") || !strings.Contains(r.Remark, "offset 1") {
		t.Fatalf("reply refused by its requester: %v", r)
	}
	if got := env.Store.MaxOffset(replyTopic, 0); got != 2 {
		t.Fatalf("reply topic max offset %d, want 2", got)
	}

	// Once the requester's connection closes, it is gone.
	requester.Close()
	brokertest.Eventually(t, 5*time.Second, "the requester to be gone", func() bool {
		r := reply()
		return r.Code == remoting.ConsumerNotOnline && strings.Contains(r.Remark, "not connected")
	})
}
