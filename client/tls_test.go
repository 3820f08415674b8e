package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"

	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// Our client produces and pulls through a broker whose ports, name
// server's included, speak TLS only, and a plain one is refused there.
func TestClientTLS(t *testing.T) {
	certFile, keyFile, pool := brokertest.WriteCert(t, t.TempDir(), "broker")
	e := startBroker(t, func(c *server.Config) {
		c.TLS = server.TLSOptions{Mode: server.TLSOn, CertFile: certFile, KeyFile: keyFile}
	})
	topic := brokertest.Name("T")
	e.createTopic(t, topic, 2)
	p := startProducer(t, e, func(o *ProducerOptions) { o.Client.TLS = &tls.Config{RootCAs: pool} })
	const n = 5
	for i := range n {
		if _, err := p.SendSync(context.Background(), NewMessage(topic, fmt.Appendf(nil, "tls-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if got := pullTopic(t, testInstance(t, p), topic); len(got) != n {
		t.Fatalf("pulled %d messages over TLS, sent %d", len(got), n)
	}

	plain, err := NewProducer(ProducerOptions{Client: e.options(), Group: brokertest.Name("pg")})
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Start(); err == nil {
		defer plain.Shutdown(context.Background())
		if _, err := plain.SendSync(context.Background(), NewMessage(topic, []byte("plain"))); err == nil {
			t.Fatal("a plain producer sent through a TLS-only broker")
		}
	}
}
