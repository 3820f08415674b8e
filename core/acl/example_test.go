package acl_test

import (
	"fmt"
	"net/netip"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/remoting"
)

// The configuration of doc.go, and the one call a server makes per
// request.
func ExampleChecker_Check() {
	cfg, err := acl.ParseConfig([]byte(`
enabled: true
globalWhiteRemoteAddresses: [10.10.103.*, 192.168.0.0/16]
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress: 172.16.1.*
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [Orders=PUB|SUB, Audit=DENY]
    groupPerms: [billing=SUB]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	checker, err := acl.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	client := netip.MustParseAddr("172.16.1.20")
	for _, topic := range []string{"Orders", "Audit"} {
		req := remoting.NewRequest(remoting.PullMessage, map[string]string{"consumerGroup": "billing", "topic": topic}, nil)
		acl.Sign(req, "RocketMQ", "12345678", "") // what the client does
		fmt.Println(topic, checker.Check(client, req))
	}
	// A heartbeat's consumer groups are in its body: the broker names them.
	hb := remoting.NewRequest(remoting.HeartBeat, nil, []byte(`{"consumerDataSet":[{"groupName":"billing"}]}`))
	acl.Sign(hb, "RocketMQ", "12345678", "")
	fmt.Println("heartbeat", checker.Check(client, hb, acl.GroupRes("billing", acl.Sub)))
	// Output:
	// Orders <nil>
	// Audit acl: PULL_MESSAGE denied: account "RocketMQ" has no SUB on topic "Audit"
	// heartbeat <nil>
}
