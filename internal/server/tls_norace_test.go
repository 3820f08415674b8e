//go:build !race

// The official client's WithTls sets a process-wide switch that its
// running consumers read without a lock, so under the race detector a
// test that flips it races with the previous test's consumer goroutines.
// These tests run without -race; .ci/run runs them so. Our own client's
// TLS is covered under -race by client.TestClientTLS and the tests in
// tls_e2e_test.go.

package server_test

import (
	"context"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// officialTLSOff turns the official client's TLS off again when the test
// ends. Its WithTls sets a process-wide switch (the remoting config every
// producer and consumer of the process shares), so a test that turns it
// on would otherwise make later tests dial TLS. A resolver with no address
// makes the producer constructor stop right after applying the option.
func officialTLSOff(t *testing.T) {
	t.Cleanup(func() {
		_, _ = producer.NewDefaultProducer(producer.WithTls(false), producer.WithNsResolver(primitive.NewPassthroughResolver(nil)))
	})
}

func TestTLSOfficialClientEndToEnd(t *testing.T) {
	officialTLSOff(t)
	env, _, _, _ := startTLS(t, server.TLSOn, "")
	produceConsume(t, env, []producer.Option{producer.WithTls(true)}, []consumer.Option{consumer.WithTls(true)})

	// Plain clients on either port are closed cleanly; TLS goes on.
	expectCleanClose(t, env.BrokerAddr)
	expectCleanClose(t, env.NamesrvAddr)
	p := env.Producer(t, producer.WithTls(true))
	if res, err := p.SendSync(context.Background(), primitive.NewMessage(aclTopic, []byte("after"))); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send after the plain clients: %v %v", res, err)
	}
}

func TestTLSPermissiveServesOfficialClientsBothWays(t *testing.T) {
	officialTLSOff(t)
	env, _, _, _ := startTLS(t, server.TLSPermissive, "")
	for _, useTLS := range []bool{true, false} {
		p := env.Producer(t, producer.WithTls(useTLS))
		res, err := p.SendSync(context.Background(), primitive.NewMessage(aclTopic, []byte("permissive")))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send with tls %v: %v %v", useTLS, res, err)
		}
	}
}

// TestTLSDefaultServesOfficialTLSClients starts a broker with no TLS
// settings, as a RocketMQ broker is started by default, and produces and
// consumes with the official client's TLS turned on. That client does not
// verify the broker's certificate (it dials with InsecureSkipVerify, in
// its internal/remote/tcp_conn.go), so the generated self-signed one is
// accepted as any would be; TestTLSSelfSignedKeptAndReused checks the
// certificate itself with a client that verifies.
func TestTLSDefaultServesOfficialTLSClients(t *testing.T) {
	officialTLSOff(t)
	env := brokertest.Start(t, func(c *server.Config) {
		c.Broker.Topics = []broker.TopicOptions{{Name: aclTopic, Queues: 2}}
	})
	produceConsume(t, env, []producer.Option{producer.WithTls(true)}, []consumer.Option{consumer.WithTls(true)})
}

// TestTLSEnforcingRefusesPlainOfficialClient runs mode enforcing on the
// generated certificate: the official client with TLS is served, a plain
// one is refused on both ports.
func TestTLSEnforcingRefusesPlainOfficialClient(t *testing.T) {
	officialTLSOff(t)
	env := brokertest.Start(t, func(c *server.Config) {
		c.TLS.Mode = server.TLSEnforcing
		c.Broker.Topics = []broker.TopicOptions{{Name: aclTopic, Queues: 2}}
	})
	p := env.Producer(t, producer.WithTls(true))
	if res, err := p.SendSync(context.Background(), primitive.NewMessage(aclTopic, []byte("tls"))); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send with TLS: %v %v", res, err)
	}
	plain := env.Producer(t, producer.WithTls(false), producer.WithRetry(0))
	if _, err := plain.SendSync(context.Background(), primitive.NewMessage(aclTopic, []byte("plain"))); err == nil {
		t.Fatal("a plain send was served in enforcing mode")
	}
	expectCleanClose(t, env.BrokerAddr)
	expectCleanClose(t, env.NamesrvAddr)
}
