package server

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store/storetest"
)

const aclFileGood = `
listen: 127.0.0.1:0
namesrvListen: 127.0.0.1:0
accessKey: brokerAdmin
secretKey: brokerAdminSecret
acl:
  enabled: true
  dataVersion: [{counter: 1, timestamp: 1}]
  accounts:
    - accessKey: brokerAdmin
      secretKey: brokerAdminSecret
      admin: true
    - accessKey: orderApp
      secretKey: orderAppSecret
      topicPerms: [Orders=PUB]
`

func TestACLConfigStrict(t *testing.T) {
	var c Config
	if err := c.decode([]byte(aclFileGood), ""); err != nil {
		t.Fatalf("good file: %v", err)
	}
	if !c.ACL.Enabled || len(c.ACL.Accounts) != 2 || c.ACL.Accounts[1].TopicPerms[0] != "Orders=PUB" || c.Broker.AccessKey != "brokerAdmin" {
		t.Fatalf("decoded %+v", c.ACL)
	}
	// A section without enabled is on, as a plain_acl.yml placed there
	// means; enabled: false keeps it off.
	for yml, want := range map[string]bool{
		"acl:\n  accounts:\n    - {accessKey: orderApp, secretKey: orderAppSecret}\n":                   true,
		"acl:\n  enabled: false\n  accounts:\n    - {accessKey: orderApp, secretKey: orderAppSecret}\n": false,
		"listen: 127.0.0.1:0\n": false,
	} {
		var c Config
		if err := c.decode([]byte(yml), ""); err != nil || c.ACL.Enabled != want {
			t.Errorf("%q: enabled %v, err %v; want enabled %v", yml, c.ACL.Enabled, err, want)
		}
	}
	for _, bad := range []string{
		"acl:\n  enabled: true\n  accountz: []\n",
		"acl:\n  accounts:\n    - accessKey: orderApp\n      secretKey: orderAppSecret\n      topicPerm: [Orders=PUB]\n",
	} {
		var c Config
		err := c.decode([]byte(bad), "")
		if err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("%q: got %v, want an unknown key refused", bad, err)
		}
	}
}

func TestACLStartReportsEveryProblem(t *testing.T) {
	_, err := Start(Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Logger: quiet(), ACL: acl.Config{
		Enabled:  true,
		Accounts: []acl.Account{{AccessKey: "short", SecretKey: "x"}, {AccessKey: "orderApp", SecretKey: "orderAppSecret", TopicPerms: []string{"Orders=WRITE"}}},
	}})
	if err == nil {
		t.Fatal("Start accepted a bad ACL")
	}
	for _, want := range []string{"short", "WRITE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestACLSelfRegistration starts a broker with ACL on and no account of
// its own: it registers with its embedded name server in-process, which
// trusts it, so its topics are routable.
func TestACLSelfRegistration(t *testing.T) {
	cfg := Config{DataDir: t.TempDir(), Listen: "127.0.0.1:0", NamesrvListen: "127.0.0.1:0", Logger: quiet(), ACL: acl.Config{
		Enabled:  true,
		Accounts: []acl.Account{{AccessKey: "orderApp", SecretKey: "orderAppSecret"}},
	}}
	cfg.Broker.Topics = []broker.TopicOptions{{Name: "SelfRegistered"}}
	s, err := Start(cfg)
	if err != nil {
		t.Fatalf("Start with ACL on and no broker account: %v", err)
	}
	defer s.Shutdown(context.Background())
	if _, ok := s.NS.Route("SelfRegistered"); !ok {
		t.Fatal("the broker's own registration made no route")
	}
}

func TestInsecurePolicy(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		fail bool
	}{
		{Config{Listen: "127.0.0.1:10911", NamesrvListen: "127.0.0.1:9876"}, false},
		{Config{Listen: "localhost:10911", NamesrvListen: "[::1]:9876"}, false},
		{Config{Listen: "0.0.0.0:10911"}, true},
		{Config{Listen: ":10911"}, true},
		{Config{Listen: "127.0.0.1:10911", NamesrvListen: "10.0.0.5:9876"}, true},
		{Config{Listen: "0.0.0.0:10911", Insecure: true}, false},
		{Config{Listen: "0.0.0.0:10911", ACL: acl.Config{Enabled: true}}, false},
	} {
		err := c.cfg.checkExposure()
		if (err != nil) != c.fail || (err != nil && !errors.Is(err, ErrInsecure)) {
			t.Errorf("%s / %s insecure=%v: %v", c.cfg.Listen, c.cfg.NamesrvListen, c.cfg.Insecure, err)
		}
	}
	_, err := Start(Config{DataDir: t.TempDir(), Listen: "0.0.0.0:0", Logger: quiet()})
	if !errors.Is(err, ErrInsecure) || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("Start on 0.0.0.0 without ACL: %v", err)
	}
}

// TestACLReload checks that a reload applies a good ACL and that a bad
// one leaves the running ACL in force.
func TestACLReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "broker.yaml")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(aclFileGood)
	var cfg Config
	if err := cfg.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	var logs storetest.LogBuffer
	cfg.DataDir, cfg.ACLSource = dir, ACLFile(path)
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })

	cl := remoting.NewClient(remoting.ClientOptions{Logger: quiet()})
	t.Cleanup(func() { cl.Close() })
	route := func() int16 {
		req := remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "Orders"}, nil)
		acl.Sign(req, "orderApp", "orderAppSecret", "")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := cl.Invoke(ctx, s.BrokerAddr, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Code
	}
	if code := route(); code == remoting.NoPermission {
		t.Fatal("orderApp refused a route of a topic it may publish to")
	}

	// A bad file: an unknown key, and a permission that does not parse.
	// Both are refused; orderApp still works.
	for _, bad := range []string{
		strings.Replace(aclFileGood, "topicPerms:", "topicPermz:", 1),
		strings.Replace(aclFileGood, "Orders=PUB", "Orders=WRITE", 1),
	} {
		write(bad)
		if err := s.ReloadACL(); err == nil {
			t.Fatalf("reload of a bad ACL succeeded:\n%s", bad)
		}
		if code := route(); code == remoting.NoPermission {
			t.Fatal("a refused reload changed the running ACL")
		}
	}

	// A good change applies: orderApp loses the topic.
	write(strings.Replace(aclFileGood, "Orders=PUB", "Orders=DENY", 1))
	if err := s.ReloadACL(); err != nil {
		t.Fatal(err)
	}
	if code := route(); code != remoting.NoPermission {
		t.Fatalf("after reload: code %d, want NO_PERMISSION", code)
	}
	// Refusals are logged once per 10 s per kind, with a count.
	for range 5 {
		route()
	}
	if n := strings.Count(logs.String(), "acl: request refused"); n != 1 {
		t.Fatalf("%d refusal lines logged for 6 refusals, want 1:\n%s", n, logs.String())
	}
}
