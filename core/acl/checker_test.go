package acl_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/remoting"
)

const testACL = `
enabled: true
globalWhiteRemoteAddresses: [10.9.0.0/16]
accounts:
  - accessKey: publisher
    secretKey: publisher-secret
    defaultTopicPerm: DENY
    topicPerms: [Orders=PUB, Audit=DENY]
  - accessKey: consumer1
    secretKey: consumer-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: DENY
    topicPerms: [Audit=DENY]
    groupPerms: [g1=SUB]
  - accessKey: admin001
    secretKey: admin-secret
    admin: true
  - accessKey: admin002
    secretKey: admin-secret-2
    admin: true
    topicPerms: [Orders=SUB]
  - accessKey: restricted
    secretKey: restricted-secret
    whiteRemoteAddress: 192.168.1.*
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: PUB|SUB
`

var secrets = map[string]string{
	"publisher":  "publisher-secret",
	"consumer1":  "consumer-secret",
	"admin001":   "admin-secret",
	"admin002":   "admin-secret-2",
	"restricted": "restricted-secret",
	"stranger":   "stranger-secret",
}

func testChecker(t testing.TB) *acl.Checker {
	cfg, err := acl.ParseConfig([]byte(testACL))
	if err != nil {
		t.Fatal(err)
	}
	c, err := acl.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCheck(t *testing.T) {
	c := testChecker(t)
	send := func(topic string) map[string]string {
		h := remoting.SendHeader{ProducerGroup: "pg", Topic: topic}
		return h.ExtFields(true)
	}
	pull := func(group, topic string) map[string]string {
		return map[string]string{"consumerGroup": group, "topic": topic, "queueId": "0"}
	}
	for _, tc := range []struct {
		name    string
		account string // "" sends unsigned
		remote  string
		code    int16
		ext     map[string]string
		extra   []acl.Resource
		reason  acl.Reason // 0: allowed
		res     acl.Resource
	}{
		{name: "unsigned", code: remoting.PullMessage, ext: pull("g1", "Orders"), reason: acl.NoAccessKey},
		{name: "unsigned, globally white-listed, even admin", remote: "10.9.1.1", code: remoting.DeleteTopicInBroker, ext: map[string]string{"topic": "Orders"}},
		{name: "unknown account", account: "stranger", code: remoting.PullMessage, ext: pull("g1", "Orders"), reason: acl.UnknownAccount},
		{name: "restricted from elsewhere", account: "restricted", remote: "192.168.2.1", code: remoting.SendMessageV2, ext: send("Orders"), reason: acl.AddressNotAllowed},
		{name: "restricted from its subnet", account: "restricted", remote: "192.168.1.77", code: remoting.SendMessageV2, ext: send("Orders")},

		{name: "publish allowed", account: "publisher", code: remoting.SendMessageV2, ext: send("Orders")},
		{name: "batch allowed", account: "publisher", code: remoting.SendBatchMessage, ext: send("Orders")},
		{name: "publish denied topic", account: "publisher", code: remoting.SendMessageV2, ext: send("Audit"), reason: acl.NoPermission, res: acl.Resource{Kind: acl.Topic, Name: "Audit", Perm: acl.Pub}},
		{name: "publish default deny", account: "publisher", code: remoting.SendMessageV2, ext: send("Other"), reason: acl.NoPermission, res: acl.Resource{Kind: acl.Topic, Name: "Other", Perm: acl.Pub}},
		{name: "publisher cannot consume", account: "publisher", code: remoting.PullMessage, ext: pull("g1", "Orders"), reason: acl.NoPermission, res: acl.Resource{Kind: acl.Group, Name: "g1", Perm: acl.Sub}},
		{name: "publisher cannot write a retry topic", account: "publisher", code: remoting.SendMessageV2, ext: send("%RETRY%g1"), reason: acl.NoPermission, res: acl.Resource{Kind: acl.Group, Name: "g1", Perm: acl.Sub}},
		{name: "publisher route", account: "publisher", code: remoting.GetRouteInfoByTopic, ext: map[string]string{"topic": "Orders"}},
		{name: "publisher route denied", account: "publisher", code: remoting.GetRouteInfoByTopic, ext: map[string]string{"topic": "Other"}, reason: acl.NoPermission, res: acl.Resource{Kind: acl.Topic, Name: "Other", Perm: acl.PubSub}},
		{name: "end transaction needs the stored topic", account: "publisher", code: remoting.EndTransaction, ext: map[string]string{"producerGroup": "pg"}, reason: acl.NoResource},
		{name: "end transaction", account: "publisher", code: remoting.EndTransaction, ext: map[string]string{"producerGroup": "pg"}, extra: []acl.Resource{acl.TopicRes("Orders", acl.Pub)}},
		{name: "publisher not admin", account: "publisher", code: remoting.UpdateAndCreateTopic, ext: map[string]string{"topic": "Orders"}, reason: acl.NotAdmin},

		{name: "consume", account: "consumer1", code: remoting.PullMessage, ext: pull("g1", "Orders")},
		{name: "consume a retry topic", account: "consumer1", code: remoting.PullMessage, ext: pull("g1", "%RETRY%g1")},
		{name: "consume denied topic", account: "consumer1", code: remoting.PullMessage, ext: pull("g1", "Audit"), reason: acl.NoPermission, res: acl.Resource{Kind: acl.Topic, Name: "Audit", Perm: acl.Sub}},
		{name: "consume as another group", account: "consumer1", code: remoting.PullMessage, ext: pull("g2", "Orders"), reason: acl.NoPermission, res: acl.Resource{Kind: acl.Group, Name: "g2", Perm: acl.Sub}},
		{name: "commit offset", account: "consumer1", code: remoting.UpdateConsumerOffset, ext: pull("g1", "Orders")},
		{name: "commit another group's offset", account: "consumer1", code: remoting.UpdateConsumerOffset, ext: pull("g2", "Orders"), reason: acl.NoPermission, res: acl.Resource{Kind: acl.Group, Name: "g2", Perm: acl.Sub}},
		{name: "consumer cannot publish", account: "consumer1", code: remoting.SendMessage, ext: map[string]string{"producerGroup": "pg", "topic": "Orders"}, reason: acl.NoPermission, res: acl.Resource{Kind: acl.Topic, Name: "Orders", Perm: acl.Pub}},
		{name: "consumer falls back to its retry topic", account: "consumer1", code: remoting.SendMessage, ext: map[string]string{"producerGroup": "CLIENT_INNER_PRODUCER", "topic": "%RETRY%g1"}},
		{name: "send back", account: "consumer1", code: remoting.ConsumerSendMsgBack, ext: map[string]string{"group": "g1", "originTopic": "Orders", "offset": "1"}},
		{name: "send back as another group", account: "consumer1", code: remoting.ConsumerSendMsgBack, ext: map[string]string{"group": "g2", "originTopic": "Orders"}, reason: acl.NoPermission, res: acl.Resource{Kind: acl.Group, Name: "g2", Perm: acl.Sub}},
		{name: "heartbeat", account: "consumer1", code: remoting.HeartBeat, extra: []acl.Resource{acl.GroupRes("g1", acl.Sub), acl.TopicRes("Orders", acl.Sub)}},
		{name: "heartbeat producer only", account: "publisher", code: remoting.HeartBeat},
		{name: "heartbeat as another group", account: "consumer1", code: remoting.HeartBeat, extra: []acl.Resource{acl.GroupRes("g1", acl.Sub), acl.GroupRes("g2", acl.Sub)}, reason: acl.NoPermission, res: acl.Resource{Kind: acl.Group, Name: "g2", Perm: acl.Sub}},
		{name: "consume stats", account: "consumer1", code: remoting.GetConsumeStats, ext: map[string]string{"consumerGroup": "g1", "topic": "Orders"}},
		{name: "consume stats of every topic", account: "consumer1", code: remoting.GetConsumeStats, ext: map[string]string{"consumerGroup": "g1"}},
		{name: "consume stats of another group", account: "consumer1", code: remoting.GetConsumeStats, ext: map[string]string{"consumerGroup": "g2"}, reason: acl.NoPermission, res: acl.Resource{Kind: acl.Group, Name: "g2", Perm: acl.Sub}},
		{name: "consume stats of a denied topic", account: "consumer1", code: remoting.GetConsumeStats, ext: map[string]string{"consumerGroup": "g1", "topic": "Audit"}, reason: acl.NoPermission, res: acl.Resource{Kind: acl.Topic, Name: "Audit", Perm: acl.Sub}},
		{name: "topic stats", account: "consumer1", code: remoting.GetTopicStatsInfo, ext: map[string]string{"topic": "Orders"}},
		{name: "topic stats denied", account: "publisher", code: remoting.GetTopicStatsInfo, ext: map[string]string{"topic": "Orders"}, reason: acl.NoPermission, res: acl.Resource{Kind: acl.Topic, Name: "Orders", Perm: acl.Sub}},
		{name: "consumer connections", account: "consumer1", code: remoting.GetConsumerConnectionList, ext: map[string]string{"consumerGroup": "g1"}},
		{name: "another group's connections", account: "consumer1", code: remoting.GetConsumerConnectionList, ext: map[string]string{"consumerGroup": "g2"}, reason: acl.NoPermission, res: acl.Resource{Kind: acl.Group, Name: "g2", Perm: acl.Sub}},
		{name: "producer connections are admin's", account: "publisher", code: remoting.GetProducerConnectionList, ext: map[string]string{"producerGroup": "pg"}, reason: acl.NotAdmin},
		{name: "topic table is admin's", account: "consumer1", code: remoting.GetAllTopicConfig, reason: acl.NotAdmin},
		{name: "runtime info is admin's", account: "publisher", code: remoting.GetBrokerRuntimeInfo, reason: acl.NotAdmin},
		{name: "lock without body resources", account: "consumer1", code: remoting.LockBatchMQ, reason: acl.NoResource},
		{name: "lock", account: "consumer1", code: remoting.LockBatchMQ, extra: []acl.Resource{acl.GroupRes("g1", acl.Sub), acl.TopicRes("Orders", acl.Sub)}},
		{name: "unregister", account: "consumer1", code: remoting.UnregisterClient, ext: map[string]string{"clientID": "c", "consumerGroup": "g1"}},
		{name: "unregister another group", account: "consumer1", code: remoting.UnregisterClient, ext: map[string]string{"clientID": "c", "consumerGroup": "g9"}, reason: acl.NoPermission, res: acl.Resource{Kind: acl.Group, Name: "g9", Perm: acl.Sub}},
		{name: "cluster info", account: "consumer1", code: remoting.GetBrokerClusterInfo},
		{name: "consumer cannot delete a topic", account: "consumer1", code: remoting.DeleteTopicInBroker, ext: map[string]string{"topic": "Orders"}, reason: acl.NotAdmin},
		{name: "consumer cannot delete its group", account: "consumer1", code: remoting.DeleteSubscriptionGroup, ext: map[string]string{"groupName": "g1"}, reason: acl.NotAdmin},
		{name: "consumer cannot register a broker", account: "consumer1", code: remoting.RegisterBroker, reason: acl.NotAdmin},
		{name: "unknown code", account: "consumer1", code: 30000, ext: map[string]string{"command": "plugins.reload"}, reason: acl.NotAdmin},
		{name: "broker-to-client code", account: "consumer1", code: remoting.ConsumeMessageDirectly, reason: acl.NotAdmin},
		{name: "consumer cannot reset its offsets", account: "consumer1", code: remoting.InvokeBrokerToResetOffset, ext: map[string]string{"group": "g1", "topic": "Orders"}, reason: acl.NotAdmin},
		{name: "consumer cannot read its clients' status", account: "consumer1", code: remoting.InvokeBrokerToGetConsumerStatus, ext: map[string]string{"group": "g1", "topic": "Orders"}, reason: acl.NotAdmin},
		{name: "a zero extra resource", account: "consumer1", code: remoting.HeartBeat, extra: []acl.Resource{{}}, reason: acl.NoPermission},

		{name: "admin deletes", account: "admin001", code: remoting.DeleteTopicInBroker, ext: map[string]string{"topic": "Orders"}},
		{name: "admin resets offsets", account: "admin001", code: remoting.InvokeBrokerToResetOffset, ext: map[string]string{"group": "g1", "topic": "Orders"}},
		{name: "admin deletes a group", account: "admin001", code: remoting.DeleteSubscriptionGroup, ext: map[string]string{"groupName": "g1", "cleanOffset": "true"}},
		{name: "admin runs admin commands", account: "admin001", code: 30000, ext: map[string]string{"command": "plugins.reload"}},
		{name: "admin with no perms holds everything", account: "admin001", code: remoting.PullMessage, ext: pull("any", "Anything")},
		{name: "admin with perms is held to them", account: "admin002", code: remoting.PullMessage, ext: pull("g1", "Orders"), reason: acl.NoPermission, res: acl.Resource{Kind: acl.Group, Name: "g1", Perm: acl.Sub}},
		{name: "admin with perms still administers", account: "admin002", code: remoting.UnregisterBroker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := remoting.NewRequest(tc.code, tc.ext, []byte("body"))
			if tc.account != "" {
				acl.Sign(req, tc.account, secrets[tc.account], "")
			}
			remote := "127.0.0.1"
			if tc.remote != "" {
				remote = tc.remote
			}
			err := c.Check(netip.MustParseAddr(remote), req, tc.extra...)
			if tc.reason == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var d *acl.Denied
			if !errors.As(err, &d) || !errors.Is(err, acl.ErrDenied) {
				t.Fatalf("got %v, want a refusal (%d)", err, tc.reason)
			}
			if d.Reason != tc.reason || (tc.res != acl.Resource{} && d.Resource != tc.res) {
				t.Fatalf("refused with %v (reason %d, resource %+v); want reason %d, resource %+v", err, d.Reason, d.Resource, tc.reason, tc.res)
			}
		})
	}
}

func TestCheckSignatureFailures(t *testing.T) {
	c := testChecker(t)
	local := netip.MustParseAddr("127.0.0.1")
	req := remoting.NewRequest(remoting.PullMessage, map[string]string{"consumerGroup": "g1", "topic": "Orders"}, nil)
	acl.Sign(req, "consumer1", "wrong-secret", "")
	if err := c.Check(local, req); !isReason(err, acl.BadSignature) {
		t.Errorf("wrong secret: %v", err)
	}
	acl.Sign(req, "consumer1", "consumer-secret", "")
	req.Set("topic", "Audit2") // tampered after signing
	if err := c.Check(local, req); !isReason(err, acl.BadSignature) {
		t.Errorf("tampered: %v", err)
	}
	delete(req.ExtFields, "Signature")
	if err := c.Check(local, req); !isReason(err, acl.BadSignature) {
		t.Errorf("unsigned with an AccessKey: %v", err)
	}
}

func isReason(err error, r acl.Reason) bool {
	var d *acl.Denied
	return errors.As(err, &d) && d.Reason == r
}

func TestDeniedText(t *testing.T) {
	c := testChecker(t)
	for _, tc := range []struct {
		account string
		code    int16
		ext     map[string]string
		want    string
	}{
		{"", remoting.PullMessage, nil, "acl: PULL_MESSAGE denied: no AccessKey; the request is not signed and 127.0.0.1 is not globally white-listed"},
		{"stranger", remoting.PullMessage, nil, `acl: PULL_MESSAGE denied: no account "stranger"`},
		{"consumer1", remoting.DeleteTopicInBroker, nil, `acl: DELETE_TOPIC_IN_BROKER denied: account "consumer1" is not admin`},
		{"publisher", remoting.SendMessageV2, map[string]string{"b": "Audit"}, `acl: SEND_MESSAGE_V2 denied: account "publisher" has no PUB on topic "Audit"`},
		{"publisher", remoting.GetRouteInfoByTopic, map[string]string{"topic": "X"}, `acl: GET_ROUTEINFO_BY_TOPIC denied: account "publisher" has no PUB or SUB on topic "X"`},
		{"consumer1", remoting.PullMessage, map[string]string{"consumerGroup": "g2", "topic": "Orders"}, `acl: PULL_MESSAGE denied: account "consumer1" has no SUB on group "g2"`},
		{"publisher", remoting.EndTransaction, nil, `acl: END_TRANSACTION denied for account "publisher": nothing to check; needs PUB on the half message's topic`},
	} {
		req := remoting.NewRequest(tc.code, tc.ext, nil)
		if tc.account != "" {
			acl.Sign(req, tc.account, secrets[tc.account], "")
		}
		err := c.Check(netip.MustParseAddr("::ffff:127.0.0.1"), req)
		if err == nil || err.Error() != tc.want {
			t.Errorf("got  %v\nwant %s", err, tc.want)
		}
	}
}

func TestDisabled(t *testing.T) {
	var nilChecker *acl.Checker
	off, err := acl.New(acl.Config{})
	if err != nil {
		t.Fatal(err)
	}
	req := remoting.NewRequest(remoting.DeleteTopicInBroker, map[string]string{"topic": "T"}, nil)
	for _, c := range []*acl.Checker{nilChecker, off} {
		if c.Enabled() || c.Check(netip.MustParseAddr("203.0.113.9"), req) != nil {
			t.Error("a disabled checker refuses")
		}
	}
	// A disabled config is still validated.
	if _, err := acl.New(acl.Config{Accounts: []acl.Account{{AccessKey: "x"}}}); err == nil {
		t.Error("a bad disabled config is accepted")
	}
}

// TestEveryCodeHasARule: each request code core/remoting names is mapped
// explicitly; only codes it does not know fall to the admin-only default.
func TestEveryCodeHasARule(t *testing.T) {
	n := 0
	for code := int16(0); code < 32767; code++ {
		if strings.HasPrefix(remoting.RequestCode(code).String(), "RequestCode(") {
			continue
		}
		n++
		if !acl.HasCodeRule(code) {
			t.Errorf("%s (%d) has no rule", remoting.RequestCode(code), code)
		}
	}
	if n < 40 {
		t.Fatalf("only %d known codes; is the scan broken?", n)
	}
}

func TestRequestResources(t *testing.T) {
	for _, tc := range []struct {
		code int16
		ext  map[string]string
		want []acl.Resource
	}{
		{remoting.SendMessage, map[string]string{"producerGroup": "pg", "topic": "T"}, []acl.Resource{{acl.Topic, "T", acl.Pub}}},
		{remoting.SendMessageV2, map[string]string{"a": "pg", "b": "T"}, []acl.Resource{{acl.Topic, "T", acl.Pub}}},
		{remoting.SendReplyMessageV2, map[string]string{"a": "pg", "b": "%RETRY%g"}, []acl.Resource{{acl.Group, "g", acl.Sub}}},
		{remoting.PullMessage, map[string]string{"consumerGroup": "g", "topic": "T"}, []acl.Resource{{acl.Group, "g", acl.Sub}, {acl.Topic, "T", acl.Sub}}},
		{remoting.PullMessage, nil, []acl.Resource{{acl.Group, "", acl.Sub}, {acl.Topic, "", acl.Sub}}},
		{remoting.ConsumerSendMsgBack, map[string]string{"group": "g"}, []acl.Resource{{acl.Group, "g", acl.Sub}}},
		{remoting.GetRouteInfoByTopic, map[string]string{"topic": "T"}, []acl.Resource{{acl.Topic, "T", acl.PubSub}}},
		{remoting.HeartBeat, map[string]string{"x": "y"}, nil},
		{remoting.DeleteTopicInBroker, map[string]string{"topic": "T"}, nil},
	} {
		got := acl.RequestResources(remoting.NewRequest(tc.code, tc.ext, nil), nil)
		if len(got) != len(tc.want) {
			t.Errorf("%s: %+v, want %+v", remoting.RequestCode(tc.code), got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: %+v, want %+v", remoting.RequestCode(tc.code), got, tc.want)
			}
		}
	}
}

func TestCheckDoesNotAllocate(t *testing.T) {
	c := testChecker(t)
	local := netip.MustParseAddr("127.0.0.1")
	h := remoting.SendHeader{ProducerGroup: "pg", Topic: "Orders", Properties: "KEYS\x01k\x02"}
	send := remoting.NewRequest(remoting.SendMessageV2, h.ExtFields(true), make([]byte, 1024))
	acl.Sign(send, "publisher", "publisher-secret", "")
	hb := remoting.NewRequest(remoting.HeartBeat, nil, []byte(`{"clientID":"x"}`))
	acl.Sign(hb, "consumer1", "consumer-secret", "")
	extra := []acl.Resource{acl.GroupRes("g1", acl.Sub), acl.TopicRes("Orders", acl.Sub)}
	c.Check(local, send) // warm the signer pool
	if n := testing.AllocsPerRun(100, func() {
		if err := c.Check(local, send); err != nil {
			t.Fatal(err)
		}
		if err := c.Check(local, hb, extra...); err != nil {
			t.Fatal(err)
		}
	}); n > 0 {
		t.Errorf("Check allocates %.1f times per allowed pair", n)
	}
}

func BenchmarkCheck(b *testing.B) {
	c := testChecker(b)
	local := netip.MustParseAddr("127.0.0.1")
	h := remoting.SendHeader{ProducerGroup: "pg", Topic: "Orders", Properties: "KEYS\x01k\x02"}
	req := remoting.NewRequest(remoting.SendMessageV2, h.ExtFields(true), make([]byte, 1024))
	acl.Sign(req, "publisher", "publisher-secret", "")
	b.ReportAllocs()
	b.SetBytes(1024)
	for b.Loop() {
		if err := c.Check(local, req); err != nil {
			b.Fatal(err)
		}
	}
}
