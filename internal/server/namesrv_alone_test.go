package server_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// A name server alone enforces the process's access control and
// connection limits, as the embedded one does.
func TestNamesrvAloneACLAndLimits(t *testing.T) {
	cfg := server.Config{
		NamesrvListen: "127.0.0.1:0",
		Logger:        brokertest.Logger(),
		Remoting:      remoting.ServerOptions{MaxConnsPerAddr: 2},
		ACL: acl.Config{Enabled: true, Accounts: []acl.Account{
			{AccessKey: "nsAdmin", SecretKey: "nsAdminSecret", Admin: true},
			{AccessKey: "appUser1", SecretKey: "appSecret12", DefaultTopicPerm: "PUB|SUB"},
		}},
	}
	srv, err := server.StartNamesrv(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	})
	cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer cl.Close()
	register := func(ak, sk string) *remoting.Command {
		t.Helper()
		req := remoting.NewRequest(remoting.RegisterBroker, map[string]string{
			"brokerName": "b", "brokerAddr": "127.0.0.1:1", "clusterName": "c", "brokerId": "0",
		}, []byte(`{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":1,"writeQueueNums":1,"perm":6}}}}`))
		if ak != "" {
			acl.Sign(req, ak, sk, "")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := cl.Invoke(ctx, srv.NamesrvAddr, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, c := range []struct{ ak, sk string }{{"", ""}, {"appUser1", "appSecret12"}, {"nsAdmin", "wrongSecret"}} {
		if resp := register(c.ak, c.sk); resp.Code != remoting.NoPermission {
			t.Fatalf("registration by %q: code %d %q, want NO_PERMISSION", c.ak, resp.Code, resp.Remark)
		}
	}
	if _, ok := srv.NS.Route("T"); ok {
		t.Fatal("a refused registration made a route")
	}
	if resp := register("nsAdmin", "nsAdminSecret"); resp.Code != remoting.Success {
		t.Fatalf("admin registration: %d %q", resp.Code, resp.Remark)
	}
	if _, ok := srv.NS.Route("T"); !ok {
		t.Fatal("the admin's registration made no route")
	}

	// The client above holds one connection; one more fits, a third is
	// closed as soon as it is accepted.
	second, err := net.Dial("tcp", srv.NamesrvAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	brokertest.Eventually(t, 10*time.Second, "the third connection closed by the limit", func() bool {
		third, err := net.Dial("tcp", srv.NamesrvAddr)
		if err != nil {
			return false
		}
		defer third.Close()
		_ = third.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = third.Read(make([]byte, 1))
		return err != nil && !isTimeout(err)
	})
}

// TestNamesrvAloneNeedsSignedBrokers registers broker processes with a
// name server alone under ACL: they get no in-process trust there, so one
// without an account of its own is refused and one signing as an admin is
// routed. (Both speak plain to the name server's permissive port.)
func TestNamesrvAloneNeedsSignedBrokers(t *testing.T) {
	srv, err := server.StartNamesrv(server.Config{
		NamesrvListen: "127.0.0.1:0",
		Logger:        brokertest.Logger(),
		ACL:           acl.Config{Enabled: true, Accounts: []acl.Account{{AccessKey: "nsAdmin", SecretKey: "nsAdminSecret", Admin: true}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	for _, b := range []struct{ ak, sk, topic string }{{"", "", "Unsigned"}, {"nsAdmin", "nsAdminSecret", "Signed"}} {
		brokertest.Start(t, func(c *server.Config) {
			c.NamesrvListen, c.NameServers = "", []string{srv.NamesrvAddr}
			c.Broker.AccessKey, c.Broker.SecretKey = b.ak, b.sk
			c.Broker.BrokerName = "broker" + b.topic
			c.Broker.Topics = []broker.TopicOptions{{Name: b.topic}}
		})
	}
	if _, ok := srv.NS.Route("Unsigned"); ok {
		t.Fatal("a broker without an account registered with a name server alone")
	}
	if _, ok := srv.NS.Route("Signed"); !ok {
		t.Fatal("a broker signing as the admin is not routed")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestNamesrvAloneHTTP serves /healthz, /readyz and /metrics for a name
// server alone.
func TestNamesrvAloneHTTP(t *testing.T) {
	srv, err := server.StartNamesrv(server.Config{NamesrvListen: "127.0.0.1:0", HTTPListen: "127.0.0.1:0", Logger: brokertest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	for _, c := range []struct{ path, want string }{
		{"/healthz", "ok"}, {"/readyz", "ready"}, {"/metrics", "go_goroutines"},
	} {
		if code, body := get(t, srv, c.path); code != 200 || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: %d %q, want 200 containing %q", c.path, code, body, c.want)
		}
	}
	if code, _ := get(t, srv, "/"); code != 404 {
		t.Errorf("GET / on a name server: %d, want 404 (no console)", code)
	}
}
