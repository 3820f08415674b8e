package broker_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// TestRefusalKinds sends the same refused messages in process
// (SendLocalBatch, as the gRPC endpoint does) and over the remoting port:
// the in-process answer wraps the kind a front end maps to its own code,
// and the remoting port answers the code its one table gives that kind.
func TestRefusalKinds(t *testing.T) {
	env := brokertest.Start(t)
	createTopic(t, env, "Good", 2)
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: "ReadOnly", ReadQueueNums: 1, WriteQueueNums: 1, Perm: remoting.PermRead}); err != nil {
		t.Fatal(err)
	}
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	longProps := message.EncodeProperties(map[string]string{"big": strings.Repeat("p", message.MaxPropertiesLen)})
	cases := []struct {
		name     string
		send     broker.LocalSend
		kind     error
		also     error // a second error the answer wraps, if any
		code     int16
		inRemark string
	}{
		{"bad topic name", broker.LocalSend{Topic: "bad topic", QueueID: 0, Body: []byte("x")}, broker.ErrNoQueue, broker.ErrBadTopic, remoting.SystemError, "allowed are"},
		{"reserved topic", broker.LocalSend{Topic: "SCHEDULE_TOPIC_XXXX", QueueID: 0, Body: []byte("x")}, broker.ErrNoPermission, nil, remoting.NoPermission, "reserved"},
		{"not writable", broker.LocalSend{Topic: "ReadOnly", QueueID: 0, Body: []byte("x")}, broker.ErrNoPermission, nil, remoting.NoPermission, "not writable"},
		{"oversize body", broker.LocalSend{Topic: "Good", QueueID: 0, Body: bytes.Repeat([]byte("x"), 4<<20+1)}, broker.ErrTooLarge, nil, remoting.MessageIllegal, "limit"},
		{"oversize properties", broker.LocalSend{Topic: "Good", QueueID: 0, Properties: longProps, Body: []byte("x")}, broker.ErrTooLarge, message.ErrPropertiesTooLong, remoting.MessageIllegal, "properties"},
		{"no such queue", broker.LocalSend{Topic: "Good", QueueID: 9, Body: []byte("x")}, broker.ErrNoQueue, nil, remoting.SystemError, "queue 9"},
		{"bad delay level", broker.LocalSend{Topic: "Good", QueueID: 0, Properties: message.EncodeProperties(map[string]string{message.PropertyDelayLevel: "soon"}), Body: []byte("x")},
			broker.ErrIllegal, nil, remoting.MessageIllegal, "DELAY"},
	}
	kinds := []error{broker.ErrIllegal, broker.ErrTooLarge, broker.ErrNoPermission, broker.ErrTopicNotFound, broker.ErrNoQueue,
		broker.ErrUnavailable, broker.ErrNotLeader, broker.ErrInternal}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := env.Broker.SendLocalBatch([]broker.LocalSend{c.send})[0]
			if !errors.Is(got.Err, c.kind) {
				t.Fatalf("in process: %v, want an error of kind %q", got.Err, c.kind)
			}
			for _, k := range kinds {
				if k != c.kind && errors.Is(got.Err, k) {
					t.Errorf("in process: %v is of kind %q too", got.Err, k)
				}
			}
			if c.also != nil && !errors.Is(got.Err, c.also) {
				t.Errorf("in process: %v does not wrap %v", got.Err, c.also)
			}
			if !strings.Contains(got.Err.Error(), c.inRemark) {
				t.Errorf("in process: %q does not say %q", got.Err, c.inRemark)
			}
			h := map[string]string{"producerGroup": "p", "topic": c.send.Topic, "queueId": strconv.Itoa(int(c.send.QueueID)), "sysFlag": "0",
				"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0", "properties": string(c.send.Properties), "reconsumeTimes": "0"}
			resp, err := cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.SendMessage, h, c.send.Body))
			if err != nil {
				t.Fatal(err)
			}
			if resp.Code != c.code || !strings.Contains(resp.Remark, c.inRemark) {
				t.Errorf("remoting: code %d %q, want %d saying %q", resp.Code, resp.Remark, c.code, c.inRemark)
			}
		})
	}
}
