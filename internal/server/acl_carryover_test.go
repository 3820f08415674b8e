package server_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// plainACL4x is a RocketMQ 4.x plain_acl.yml in the shape its
// distribution ships: global white addresses, an application account, an
// admin bound to an address of its own, and no enabled key, no broker
// account anywhere.
const plainACL4x = `globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - AclOrders=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - aclBilling=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
  - accessKey: localApp
    secretKey: localAppSecret
    whiteRemoteAddress: 127.0.0.1
    defaultTopicPerm: PUB
`

// TestACLPlain4xCarriesOver places a 4.x plain_acl.yml under acl: and
// adds nothing else: the broker starts (its embedded name server trusts
// the broker's own registration, made within the process), clients
// signed by the official Go client's credentials are served, unsigned
// ones and accounts used from outside their whiteRemoteAddress are
// refused, and a registration over the name server's socket still needs
// a signature.
func TestACLPlain4xCarriesOver(t *testing.T) {
	dir := t.TempDir()
	var yml strings.Builder
	yml.WriteString("dataDir: data\nlisten: 127.0.0.1:0\nnamesrvListen: 127.0.0.1:0\nacl:\n")
	for _, line := range strings.SplitAfter(plainACL4x, "\n") {
		if line != "" {
			yml.WriteString("  " + line)
		}
	}
	path := filepath.Join(dir, "broker.yaml")
	if err := os.WriteFile(path, []byte(yml.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg server.Config
	if err := cfg.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.Logger = brokertest.Logger()
	cfg.Broker.Topics = []broker.TopicOptions{{Name: aclTopic, Queues: 2}}
	env := brokertest.StartConfig(t, cfg)

	// Signed by an account of the file: produced and consumed.
	produceConsume(t, env,
		[]producer.Option{producer.WithCredentials(creds("RocketMQ", "12345678"))},
		[]consumer.Option{consumer.WithCredentials(creds("RocketMQ", "12345678"))})
	p := env.Producer(t, producer.WithCredentials(creds("localApp", "localAppSecret")))
	if _, err := p.SendSync(context.Background(), primitive.NewMessage(aclTopic, []byte("from the bound address"))); err != nil {
		t.Fatalf("send by the account bound to 127.0.0.1: %v", err)
	}

	// Unsigned: refused by the official client's lookup and by both ports.
	unsigned := env.Producer(t, producer.WithRetry(0))
	if _, err := unsigned.SendSync(context.Background(), primitive.NewMessage(aclTopic, []byte("x"))); err == nil {
		t.Fatal("an unsigned send succeeded")
	}
	route := func() *remoting.Command {
		return remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": aclTopic}, nil)
	}
	for _, addr := range []string{env.NamesrvAddr, env.BrokerAddr} {
		if resp := invokeSigned(t, addr, route(), "", ""); resp.Code != remoting.NoPermission {
			t.Errorf("unsigned route lookup at %s: %d %q, want NO_PERMISSION", addr, resp.Code, resp.Remark)
		}
	}
	// An admin used from outside its whiteRemoteAddress: refused.
	if resp := invokeSigned(t, env.NamesrvAddr, route(), "rocketmq2", "12345678"); resp.Code != remoting.NoPermission {
		t.Errorf("rocketmq2 from loopback: %d %q, want NO_PERMISSION", resp.Code, resp.Remark)
	}
	if resp := invokeSigned(t, env.NamesrvAddr, route(), "RocketMQ", "12345678"); resp.Code != remoting.Success {
		t.Errorf("signed route lookup: %d %q", resp.Code, resp.Remark)
	}

	// The trust is the process's own connection, not loopback: an
	// unsigned registration over the socket, from this same address, is
	// refused and adds no route.
	reg := remoting.NewRequest(remoting.RegisterBroker, map[string]string{
		"brokerName": "intruder", "brokerAddr": "127.0.0.1:1", "clusterName": "DefaultCluster", "brokerId": "0",
	}, []byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":{"Intruded":{"topicName":"Intruded","readQueueNums":1,"writeQueueNums":1,"perm":6}}}}`))
	if resp := invokeSigned(t, env.NamesrvAddr, reg, "", ""); resp.Code != remoting.NoPermission {
		t.Fatalf("unsigned registration over the socket: %d %q, want NO_PERMISSION", resp.Code, resp.Remark)
	}
	if _, ok := env.NS.Route("Intruded"); ok {
		t.Fatal("a refused registration made a route")
	}
}
