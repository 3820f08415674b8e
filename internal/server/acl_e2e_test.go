package server_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/clientframes"
	"github.com/rmq-go/rmq/internal/server"
)

// The accounts of the end-to-end tests. The broker signs its own
// registrations with brokerAdmin.
const (
	brokerAK, brokerSK = "brokerAdmin", "brokerAdminSecret"
	appAK, appSK       = "orderApp", "orderAppSecret"
	pubAK, pubSK       = "pubOnly1", "pubOnlySecret"
	subAK, subSK       = "subOnly1", "subOnlySecret"
	aclTopic           = "AclOrders"
	aclGroup           = "aclBilling"
)

const aclYAML = `
enabled: true
accounts:
  - accessKey: brokerAdmin
    secretKey: brokerAdminSecret
    admin: true
  - accessKey: orderApp
    secretKey: orderAppSecret
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms: [AclOrders=PUB|SUB]
    groupPerms: [aclBilling=SUB]
  - accessKey: pubOnly1
    secretKey: pubOnlySecret
    topicPerms: [AclOrders=PUB]
    groupPerms: [aclBilling=SUB]
  - accessKey: subOnly1
    secretKey: subOnlySecret
    topicPerms: [AclOrders=SUB]
    groupPerms: [aclBilling=SUB]
`

// startACL runs a broker whose ACL is yml, with the test topic created.
func startACL(t *testing.T, yml string) *brokertest.Env {
	t.Helper()
	cfg, err := acl.ParseConfig([]byte(yml))
	if err != nil {
		t.Fatal(err)
	}
	return brokertest.Start(t, func(c *server.Config) {
		c.ACL = cfg
		c.Broker.AccessKey, c.Broker.SecretKey = brokerAK, brokerSK
		c.Broker.Topics = []broker.TopicOptions{{Name: aclTopic, Queues: 2}}
	})
}

func creds(ak, sk string) primitive.Credentials {
	return primitive.Credentials{AccessKey: ak, SecretKey: sk}
}

// invokeSigned sends one request to addr, signed with ak/sk unless ak is
// empty.
func invokeSigned(t *testing.T, addr string, req *remoting.Command, ak, sk string) *remoting.Command {
	t.Helper()
	cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer cl.Close()
	if ak != "" {
		acl.Sign(req, ak, sk, "")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, addr, req)
	if err != nil {
		t.Fatalf("%s: %v", remoting.RequestCode(req.Code), err)
	}
	return resp
}

// produceConsume sends one message with the producer's credentials and
// waits for a consumer of aclGroup with the consumer's to receive it.
func produceConsume(t *testing.T, env *brokertest.Env, popts []producer.Option, copts []consumer.Option) {
	t.Helper()
	p := env.Producer(t, popts...)
	body := brokertest.Name("hello")
	res, err := p.SendSync(context.Background(), primitive.NewMessage(aclTopic, []byte(body)))
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send: %v %v", res, err)
	}
	got := make(chan string, 16)
	c := env.PushConsumer(t, aclGroup, copts...)
	if err := c.Subscribe(aclTopic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			got <- string(m.Body)
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, aclGroup, true, aclTopic)
	for {
		if b := brokertest.Wait(t, got, 30*time.Second, "the message"); b == body {
			return
		}
	}
}

func TestACLCredentialsAccepted(t *testing.T) {
	env := startACL(t, aclYAML)
	produceConsume(t, env,
		[]producer.Option{producer.WithCredentials(creds(appAK, appSK))},
		[]consumer.Option{consumer.WithCredentials(creds(appAK, appSK))})
}

func TestACLWrongSecretRefused(t *testing.T) {
	env := startACL(t, aclYAML)
	p := env.Producer(t, producer.WithCredentials(creds(appAK, "notTheSecret")), producer.WithRetry(0))
	_, err := p.SendSync(context.Background(), primitive.NewMessage(aclTopic, []byte("x")))
	if err == nil {
		t.Fatal("send with a wrong secret succeeded")
	}
	// The client gives up at the route lookup; the broker answers the
	// send itself the same way.
	req := remoting.NewRequest(remoting.SendMessageV2, map[string]string{"a": "pg", "b": aclTopic, "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "0", "h": "0", "i": "", "j": "0", "k": "false"}, []byte("x"))
	resp := invokeSigned(t, env.BrokerAddr, req, appAK, "notTheSecret")
	if resp.Code != remoting.NoPermission || !strings.Contains(resp.Remark, "bad signature") {
		t.Fatalf("send with a wrong secret answered %d %q, want NO_PERMISSION naming the signature", resp.Code, resp.Remark)
	}
	t.Logf("client: %v; broker: %s", err, resp.Remark)
}

func TestACLPublisherCannotConsume(t *testing.T) {
	env := startACL(t, aclYAML)
	p := env.Producer(t, producer.WithCredentials(creds(pubAK, pubSK)))
	if res, err := p.SendSync(context.Background(), primitive.NewMessage(aclTopic, []byte("x"))); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send by a publisher: %v %v", res, err)
	}
	got := make(chan string, 16)
	c := env.PushConsumer(t, aclGroup, consumer.WithCredentials(creds(pubAK, pubSK)))
	if err := c.Subscribe(aclTopic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			got <- string(m.Body)
		}
		return consumer.ConsumeSuccess, nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err == nil {
		select {
		case b := <-got:
			t.Fatalf("a publisher without SUB consumed %q", b)
		case <-time.After(3 * time.Second):
		}
	}
	pull := remoting.NewRequest(remoting.PullMessage, map[string]string{"consumerGroup": aclGroup, "topic": aclTopic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0"}, nil)
	resp := invokeSigned(t, env.BrokerAddr, pull, pubAK, pubSK)
	if resp.Code != remoting.NoPermission || !strings.Contains(resp.Remark, "no SUB on topic") {
		t.Fatalf("pull by a publisher answered %d %q, want NO_PERMISSION for SUB on the topic", resp.Code, resp.Remark)
	}
}

func TestACLNonAdminCannotDeleteTopic(t *testing.T) {
	env := startACL(t, aclYAML)
	del := func(ak, sk string) *remoting.Command {
		return invokeSigned(t, env.BrokerAddr, remoting.NewRequest(remoting.DeleteTopicInBroker, map[string]string{"topic": aclTopic}, nil), ak, sk)
	}
	for _, c := range []struct{ name, ak, sk string }{{"unsigned", "", ""}, {"non-admin", appAK, appSK}} {
		if resp := del(c.ak, c.sk); resp.Code != remoting.NoPermission {
			t.Fatalf("%s DELETE_TOPIC_IN_BROKER answered %d %q", c.name, resp.Code, resp.Remark)
		}
		if _, ok := env.Broker.Topics()[aclTopic]; !ok {
			t.Fatalf("%s deleted the topic", c.name)
		}
	}
	if resp := del(brokerAK, brokerSK); resp.Code != remoting.Success {
		t.Fatalf("admin DELETE_TOPIC_IN_BROKER answered %d %q", resp.Code, resp.Remark)
	}
	if _, ok := env.Broker.Topics()[aclTopic]; ok {
		t.Fatal("the admin's delete left the topic")
	}
}

func TestACLGlobalWhiteList(t *testing.T) {
	env := startACL(t, "enabled: true\nglobalWhiteRemoteAddresses: [127.0.0.1]\naccounts:\n  - {accessKey: brokerAdmin, secretKey: brokerAdminSecret, admin: true}\n")
	produceConsume(t, env, nil, nil)
}

// TestACLBodyAndStoreResources checks the resources the broker adds from
// request bodies and the store: VIEW_MESSAGE_BY_ID needs SUB on the
// stored topic, END_TRANSACTION PUB on it, LOCK_BATCH_MQ and
// QUERY_ASSIGNMENT SUB on the body's group and topics, and a body that
// names nothing is refused.
func TestACLBodyAndStoreResources(t *testing.T) {
	env := startACL(t, aclYAML)
	p := env.Producer(t, producer.WithCredentials(creds(appAK, appSK)))
	res, err := p.SendSync(context.Background(), primitive.NewMessage(aclTopic, []byte("x")))
	if err != nil {
		t.Fatal(err)
	}
	_, off, err := message.ParseOffsetMsgID(res.OffsetMsgID)
	if err != nil {
		t.Fatal(err)
	}
	offset := strconv.FormatInt(off, 10)
	lock := []byte(`{"consumerGroup":"aclBilling","clientId":"c1","mqSet":[{"topic":"AclOrders","brokerName":"broker-a","queueId":0}]}`)
	assign := []byte(`{"topic":"AclOrders","consumerGroup":"aclBilling","clientId":"c1","strategyName":"AVG","messageModel":"CLUSTERING"}`)
	// A Java consumer's heartbeat, as fastjson writes it (codeSet as
	// numbers), for the group and topic of this test's config.
	javaHB, err := clientframes.Load(filepath.Join("..", "..", "core", "remoting", "testdata", "clients", "java", "HEART_BEAT.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	heartbeat := []byte(strings.NewReplacer("%RETRY%GID_tags", "%RETRY%aclBilling", "GID_tags", "aclBilling", "TopicTest", "AclOrders").Replace(string(javaHB.Body)))
	for _, c := range []struct {
		name   string
		req    func() *remoting.Command
		ak, sk string
		denied string // "" when allowed
	}{
		{"view by subscriber", func() *remoting.Command {
			return remoting.NewRequest(remoting.ViewMessageByID, map[string]string{"offset": offset}, nil)
		}, subAK, subSK, ""},
		{"view by publisher", func() *remoting.Command {
			return remoting.NewRequest(remoting.ViewMessageByID, map[string]string{"offset": offset}, nil)
		}, pubAK, pubSK, "no SUB on topic"},
		{"view at no record", func() *remoting.Command {
			return remoting.NewRequest(remoting.ViewMessageByID, map[string]string{"offset": "999999999"}, nil)
		}, subAK, subSK, "nothing to check"},
		{"end transaction by subscriber", func() *remoting.Command {
			return remoting.NewRequest(remoting.EndTransaction, map[string]string{"producerGroup": "pg", "commitLogOffset": offset, "commitOrRollback": "8"}, nil)
		}, subAK, subSK, "no PUB on topic"},
		{"Java heartbeat by subscriber", func() *remoting.Command { return remoting.NewRequest(remoting.HeartBeat, nil, heartbeat) }, subAK, subSK, ""},
		{"Java heartbeat by publisher", func() *remoting.Command { return remoting.NewRequest(remoting.HeartBeat, nil, heartbeat) }, pubAK, pubSK, "no SUB on"},
		{"lock by subscriber", func() *remoting.Command { return remoting.NewRequest(remoting.LockBatchMQ, nil, lock) }, subAK, subSK, ""},
		{"lock by publisher", func() *remoting.Command { return remoting.NewRequest(remoting.LockBatchMQ, nil, lock) }, pubAK, pubSK, "no SUB on topic"},
		{"lock without body", func() *remoting.Command { return remoting.NewRequest(remoting.LockBatchMQ, nil, nil) }, subAK, subSK, "nothing to check"},
		{"assignment by subscriber", func() *remoting.Command { return remoting.NewRequest(remoting.QueryAssignment, nil, assign) }, subAK, subSK, ""},
		{"assignment by publisher", func() *remoting.Command { return remoting.NewRequest(remoting.QueryAssignment, nil, assign) }, pubAK, pubSK, "no SUB on topic"},
	} {
		resp := invokeSigned(t, env.BrokerAddr, c.req(), c.ak, c.sk)
		switch {
		case c.denied == "" && resp.Code == remoting.NoPermission:
			t.Errorf("%s: refused: %s", c.name, resp.Remark)
		case c.denied != "" && (resp.Code != remoting.NoPermission || !strings.Contains(resp.Remark, c.denied)):
			t.Errorf("%s: answered %d %q, want NO_PERMISSION with %q", c.name, resp.Code, resp.Remark, c.denied)
		}
	}
}

// TestACLNonAdminCannotResetOffset checks that resetting a group's
// offsets, and the other relays to a group's clients, are an admin's.
func TestACLNonAdminCannotResetOffset(t *testing.T) {
	env := startACL(t, aclYAML)
	reset := func(ak, sk string) *remoting.Command {
		ext := map[string]string{"topic": aclTopic, "group": aclGroup, "timestamp": "0", "isForce": "true"}
		return invokeSigned(t, env.BrokerAddr, remoting.NewRequest(remoting.InvokeBrokerToResetOffset, ext, nil), ak, sk)
	}
	if resp := reset(appAK, appSK); resp.Code != remoting.NoPermission {
		t.Fatalf("non-admin INVOKE_BROKER_TO_RESET_OFFSET answered %d %q", resp.Code, resp.Remark)
	}
	for _, code := range []int16{remoting.InvokeBrokerToGetConsumerStatus, remoting.GetConsumerRunningInfo, remoting.ConsumeMessageDirectly} {
		ext := map[string]string{"topic": aclTopic, "group": aclGroup, "consumerGroup": aclGroup, "clientId": "x"}
		if resp := invokeSigned(t, env.BrokerAddr, remoting.NewRequest(code, ext, nil), appAK, appSK); resp.Code != remoting.NoPermission {
			t.Errorf("non-admin %s answered %d %q", remoting.RequestCode(code), resp.Code, resp.Remark)
		}
	}
	// The admin passes the check; the group is unknown to the broker.
	if resp := reset(brokerAK, brokerSK); resp.Code != remoting.SubscriptionGroupNotExist {
		t.Fatalf("admin INVOKE_BROKER_TO_RESET_OFFSET answered %d %q", resp.Code, resp.Remark)
	}
}
