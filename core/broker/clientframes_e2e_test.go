package broker_test

import (
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/clientframes"
	"github.com/rmq-go/rmq/internal/server"
)

// corpusDir holds the request frames official clients send.
var corpusDir = filepath.Join("..", "remoting", "testdata", "clients")

// corpusRequest loads a corpus frame as the command its client sends.
func corpusRequest(t *testing.T, client, name string) (*remoting.Command, clientframes.Frame) {
	t.Helper()
	f, err := clientframes.Load(filepath.Join(corpusDir, client, name+".txtar"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := f.Command()
	if err != nil {
		t.Fatal(err)
	}
	return req, f
}

// TestJavaTagConsumerRegistersAndPullsByTag replays a Java consumer's
// frames, exactly as the Java client serializes them, against a running
// broker: its heartbeat (codeSet as JSON numbers) must register the group
// and its tag subscription, the group's consumer list must name it, and a
// pull that relies on the registered subscription must return only the
// subscribed tags of what an official Go producer sent.
func TestJavaTagConsumerRegistersAndPullsByTag(t *testing.T) {
	env := brokertest.Start(t)
	hb, hbFrame := corpusRequest(t, "java", "HEART_BEAT")
	var body struct {
		ClientID    string `json:"clientID"`
		ConsumerSet []struct {
			Group string `json:"groupName"`
			Subs  []struct {
				Topic string `json:"topic"`
			} `json:"subscriptionDataSet"`
		} `json:"consumerDataSet"`
	}
	// Read the names the frame uses with a decoder of this test's own.
	if err := json.Unmarshal(hbFrame.Body, &body); err != nil || len(body.ConsumerSet) == 0 || len(body.ConsumerSet[0].Subs) == 0 {
		t.Fatalf("%s: %v", hbFrame, err)
	}
	clientID, group, topic := body.ClientID, body.ConsumerSet[0].Group, body.ConsumerSet[0].Subs[0].Topic
	createTopic(t, env, topic, 1)

	cl := remoting.NewClient(remoting.ClientOptions{OnRequest: func(*remoting.Conn, *remoting.Command) *remoting.Command { return nil }})
	t.Cleanup(func() { cl.Close() })
	invoke := func(req *remoting.Command) *remoting.Command {
		t.Helper()
		resp, err := cl.Invoke(context.Background(), env.BrokerAddr, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	if resp := invoke(hb); resp.Code != remoting.Success {
		t.Fatalf("Java heartbeat refused: %s %s", remoting.ResponseCode(resp.Code), resp.Remark)
	}
	list, _ := corpusRequest(t, "java", "GET_CONSUMER_LIST_BY_GROUP")
	if got := list.Get("consumerGroup"); got != group {
		t.Fatalf("corpus frames disagree: consumer list of %q, heartbeat of %q", got, group)
	}
	resp := invoke(list)
	var ids remoting.ConsumerListBody
	if resp.Code != remoting.Success || json.Unmarshal(resp.Body, &ids) != nil || !slices.Contains(ids.ConsumerIDList, clientID) {
		t.Fatalf("consumer list of %s: %s %s %s; want it to hold %s", group, remoting.ResponseCode(resp.Code), resp.Remark, resp.Body, clientID)
	}

	p := env.Producer(t)
	sent := map[string]int{}
	for i := 0; i < 3; i++ {
		for _, tag := range []string{"TagA", "TagB", "TagC"} {
			m := primitive.NewMessage(topic, []byte(tag+"-"+strconv.Itoa(i)))
			m.WithTag(tag)
			if res, err := p.SendSync(context.Background(), m); err != nil || res.Status != primitive.SendOK {
				t.Fatalf("send: %v %v", res, err)
			}
			sent[tag]++
		}
	}
	total := int64(sent["TagA"] + sent["TagB"] + sent["TagC"])

	// The push consumer's pull relies on the subscription its heartbeat
	// registered; the lite pull consumer's (PULL_MESSAGE in 4.x,
	// LITE_PULL_MESSAGE in 5.x) posts its own.
	want := map[string]int{"TagA": sent["TagA"], "TagC": sent["TagC"]}
	for _, name := range []string{"PULL_MESSAGE", "PULL_MESSAGE.litepull", "LITE_PULL_MESSAGE"} {
		pull, _ := corpusRequest(t, "java", name)
		if pull.Get("topic") != topic {
			t.Fatalf("corpus frames disagree: %s pulls %s", name, pull.Get("topic"))
		}
		if name == "PULL_MESSAGE" && pull.Get("consumerGroup") != group {
			t.Fatalf("corpus frames disagree: %s pulls for %s", name, pull.Get("consumerGroup"))
		}
		got := map[string]int{}
		for next := int64(0); next < total; {
			pull.Set("queueOffset", strconv.FormatInt(next, 10))
			resp := invoke(pull)
			switch resp.Code {
			case remoting.Success:
				recs, err := message.DecodeRecords(resp.Body)
				if err != nil {
					t.Fatalf("%s: pull body: %v", name, err)
				}
				for _, r := range recs {
					got[r.Properties().Tags()]++
				}
			case remoting.PullRetryImmediately:
			default:
				t.Fatalf("%s at %d: %s %s", name, next, remoting.ResponseCode(resp.Code), resp.Remark)
			}
			n, err := strconv.ParseInt(resp.Get("nextBeginOffset"), 10, 64)
			if err != nil || n <= next {
				t.Fatalf("%s at %d: nextBeginOffset %q", name, next, resp.Get("nextBeginOffset"))
			}
			next = n
		}
		if !maps.Equal(got, want) {
			t.Fatalf("%s: pulled tags %v; want %v (the subscription is TagA || TagC)", name, got, want)
		}
	}
}

// TestCppBatchOverSendMessageV2 replays the C++ client's batch send, which
// is SEND_MESSAGE_V2 with the batch flag rather than SEND_BATCH_MESSAGE:
// the broker must store each message of the batch, as it does for
// SEND_BATCH_MESSAGE, not the encoded batch as one message.
func TestCppBatchOverSendMessageV2(t *testing.T) {
	env := brokertest.Start(t)
	req, f := corpusRequest(t, "cpp", "SEND_MESSAGE_V2.batch")
	createTopic(t, env, req.Get("b"), 4)
	entries, err := message.DecodeBatch(f.Body)
	if err != nil {
		t.Fatal(err)
	}
	cl := remoting.NewClient(remoting.ClientOptions{})
	t.Cleanup(func() { cl.Close() })
	resp, err := cl.Invoke(context.Background(), env.BrokerAddr, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Code != remoting.Success {
		t.Fatalf("batch send: %s %s", remoting.ResponseCode(resp.Code), resp.Remark)
	}
	qid, _ := strconv.Atoi(req.Get("e"))
	maxReq := remoting.NewRequest(remoting.GetMaxOffset, map[string]string{"topic": req.Get("b"), "queueId": strconv.Itoa(qid)}, nil)
	if resp, err = cl.Invoke(context.Background(), env.BrokerAddr, maxReq); err != nil {
		t.Fatal(err)
	}
	if got := resp.Get("offset"); got != strconv.Itoa(len(entries)) {
		t.Fatalf("queue %d holds %s messages after a batch of %d", qid, got, len(entries))
	}
	pull := remoting.NewRequest(remoting.PullMessage, map[string]string{"consumerGroup": "GID_check", "topic": req.Get("b"),
		"queueId": strconv.Itoa(qid), "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "4", "subscription": "*", "expressionType": "TAG"}, nil)
	if resp, err = cl.Invoke(context.Background(), env.BrokerAddr, pull); err != nil || resp.Code != remoting.Success {
		t.Fatalf("pull: %v %v", resp, err)
	}
	recs, err := message.DecodeRecords(resp.Body)
	if err != nil || len(recs) != len(entries) {
		t.Fatalf("pulled %d records (%v), want %d", len(recs), err, len(entries))
	}
	for i, r := range recs {
		if string(r.Body()) != string(entries[i].Body) {
			t.Errorf("message %d: body %q, want %q", i, r.Body(), entries[i].Body)
		}
	}
}

// replayOrder puts heartbeats first, sends next, and unregistering last,
// the order a client's life gives them.
func replayOrder(name string) int {
	switch {
	case name == "HEART_BEAT":
		return 0
	case strings.HasPrefix(name, "SEND_"):
		return 1
	case name == "UNREGISTER_CLIENT":
		return 3
	}
	return 2
}

// TestClientCorpusReplay sends every corpus frame, as its client wrote it,
// to a running broker and name server, and checks that each is served:
// none is refused for its header or body.
func TestClientCorpusReplay(t *testing.T) {
	env := brokertest.Start(t, func(c *server.Config) { c.Broker.MaxPullSuspend = 50 * time.Millisecond })
	frames, err := clientframes.LoadAll(corpusDir)
	if err != nil {
		t.Fatal(err)
	}
	createTopic(t, env, "TopicTest", 4)
	sort.SliceStable(frames, func(i, j int) bool { return replayOrder(frames[i].Name) < replayOrder(frames[j].Name) })
	cl := remoting.NewClient(remoting.ClientOptions{OnRequest: func(*remoting.Conn, *remoting.Command) *remoting.Command { return nil }})
	t.Cleanup(func() { cl.Close() })
	members := map[string][]string{} // client ids by consumer group, from the heartbeats sent
	for _, f := range frames {
		req, err := f.Command()
		if err != nil {
			t.Fatal(err)
		}
		req.Flag &^= remoting.FlagOneway // to hear the answer
		addr := env.BrokerAddr
		if req.Code == remoting.GetRouteInfoByTopic {
			addr = env.NamesrvAddr
		}
		resp, err := cl.Invoke(context.Background(), addr, req)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		served := resp.Code == remoting.Success || resp.Code == remoting.PullNotFound || resp.Code == remoting.PullRetryImmediately
		if key, ok := stateRefusals[f.Name]; ok && !served {
			// Refused for what this broker holds, naming the value read.
			served = strings.Contains(resp.Remark, "offset "+req.Get(key))
		}
		if !served {
			t.Errorf("%s: %s %s", f, remoting.ResponseCode(resp.Code), resp.Remark)
			continue
		}
		switch req.Code {
		case remoting.HeartBeat:
			var hb remoting.HeartbeatData
			if err := json.Unmarshal(f.Body, &hb); err != nil {
				t.Fatal(err)
			}
			for _, cd := range hb.ConsumerDataSet {
				members[cd.GroupName] = append(members[cd.GroupName], hb.ClientID)
			}
		case remoting.GetConsumerListByGroup:
			var ids remoting.ConsumerListBody
			if err := json.Unmarshal(resp.Body, &ids); err != nil {
				t.Fatal(err)
			}
			for _, id := range members[req.Get("consumerGroup")] {
				if !slices.Contains(ids.ConsumerIDList, id) {
					t.Errorf("%s: %s is not listed in %v", f, id, ids.ConsumerIDList)
				}
			}
		}
	}
	if len(members["GID_tags"]) < 4 {
		t.Errorf("heartbeats of GID_tags replayed: %v", members["GID_tags"])
	}
}

// stateRefusals are the codes a fresh broker may refuse for what it holds
// (no message at the frame's offset, an offset past the queue's end), with
// the extFields key whose value the refusal must name.
var stateRefusals = map[string]string{
	"CONSUMER_SEND_MSG_BACK": "offset",
	"VIEW_MESSAGE_BY_ID":     "offset",
	"UPDATE_CONSUMER_OFFSET": "commitOffset",
}

// TestCheckClientConfig replays a Java SQL92 consumer's start-up check
// with its expression good, bad, and on a broker with SQL92 filtering off.
func TestCheckClientConfig(t *testing.T) {
	on := brokertest.Start(t)
	off := brokertest.Start(t, func(c *server.Config) { c.Broker.DisablePropertyFilter = true })
	cl := remoting.NewClient(remoting.ClientOptions{})
	t.Cleanup(func() { cl.Close() })
	for _, tc := range []struct {
		name     string
		env      *brokertest.Env
		from, to string // a rewrite of the corpus body
		want     int16
	}{
		{"as sent", on, "", "", remoting.Success},
		{"bad expression", on, "a BETWEEN 0 AND 3", "a BETWEEN AND", remoting.SubscriptionParseFailed},
		{"TAG", on, `"expressionType":"SQL92","subString":"a BETWEEN 0 AND 3"`, `"expressionType":"TAG","subString":"TagA"`, remoting.Success},
		{"SQL92 off", off, "", "", remoting.SystemError},
	} {
		req, f := corpusRequest(t, "java", "CHECK_CLIENT_CONFIG")
		if tc.from != "" {
			if !strings.Contains(string(f.Body), tc.from) {
				t.Fatalf("%s: the corpus body no longer holds %s", tc.name, tc.from)
			}
			req.Body = []byte(strings.Replace(string(f.Body), tc.from, tc.to, 1))
		}
		resp, err := cl.Invoke(context.Background(), tc.env.BrokerAddr, req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Code != tc.want {
			t.Errorf("%s: %s %s, want %s", tc.name, remoting.ResponseCode(resp.Code), resp.Remark, remoting.ResponseCode(tc.want))
		}
	}
}
