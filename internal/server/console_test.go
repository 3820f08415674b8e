package server_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/rmq-go/rmq/client"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

var csrfInput = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// TestConsoleACL checks who may use the console when access control is
// on: only an admin account of the ACL, with its secret, reads or acts.
func TestConsoleACL(t *testing.T) {
	env := startACL(t, aclYAML)
	srv := httptest.NewServer(env.ConsoleHandler("127.0.0.1:0"))
	t.Cleanup(srv.Close)
	get := func(ak, sk string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+"/plugins", nil)
		if ak != "" {
			req.SetBasicAuth(ak, sk)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}
	for _, c := range []struct{ name, ak, sk string }{
		{"no login", "", ""},
		{"not an admin", appAK, appSK},
		{"a wrong secret", brokerAK, "wrong"},
		{"an unknown account", "nobody", "x"},
	} {
		if resp, _ := get(c.ak, c.sk); resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Basic") {
			t.Errorf("%s: %d, want 401 with a Basic challenge", c.name, resp.StatusCode)
		}
	}
	resp, body := get(brokerAK, brokerSK)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("admin: %d\n%s", resp.StatusCode, body)
	}
	m := csrfInput.FindStringSubmatch(body)
	if m == nil || len(resp.Cookies()) != 1 {
		t.Fatalf("admin sees no reload form:\n%s", body)
	}
	post := func(ak, sk string) int {
		req, _ := http.NewRequest("POST", srv.URL+"/plugins-reload", strings.NewReader(url.Values{"csrf": {m[1]}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(resp.Cookies()[0])
		req.SetBasicAuth(ak, sk)
		r, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		return r.StatusCode
	}
	if code := post(appAK, appSK); code != http.StatusUnauthorized {
		t.Errorf("reload by a non-admin with the admin's form: %d, want 401", code)
	}
	if code := post(brokerAK, brokerSK); code != http.StatusOK {
		t.Errorf("reload by the admin: %d, want 200", code)
	}
}

// TestConsoleReadOnlyOffLoopback serves the console as a non-loopback
// listener would be, without access control: it refuses everything unless
// the broker is insecure, then pages render and actions are refused.
func TestConsoleReadOnlyOffLoopback(t *testing.T) {
	// Without access control and without --insecure, nothing is shown.
	closed := httptest.NewServer(brokertest.Start(t).ConsoleHandler("10.1.2.3:8080"))
	t.Cleanup(closed.Close)
	resp, err := closed.Client().Get(closed.URL + "/topics")
	if err != nil || resp.StatusCode != 401 {
		t.Fatalf("topics off loopback without --insecure: %v %v, want 401", resp.StatusCode, err)
	}
	resp.Body.Close()

	env := brokertest.Start(t, func(c *server.Config) { c.Insecure = true })
	srv := httptest.NewServer(env.ConsoleHandler("10.1.2.3:8080"))
	t.Cleanup(srv.Close)
	resp, err = srv.Client().Get(srv.URL + "/topics")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("topics: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = srv.Client().PostForm(srv.URL+"/plugins-reload", nil)
	if err != nil || resp.StatusCode != 401 {
		t.Fatalf("reload off loopback: %v %v, want 401", resp.StatusCode, err)
	}
	resp.Body.Close()
}

// TestConsoleBridge shows a running NATS bridge's status.
func TestConsoleBridge(t *testing.T) {
	opts := &natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir(), NoLog: true, NoSigs: true}
	ns, err := natsserver.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(ns.Shutdown)
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", ns.Addr().(*net.TCPAddr).Port)
	env := brokertest.Start(t, func(c *server.Config) {
		c.NATSBridge = &server.BridgeOptions{URLs: []string{natsURL}, Provision: true}
	})
	srv := httptest.NewServer(env.ConsoleHandler("127.0.0.1:0"))
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL + "/bridge")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	for _, want := range []string{"Connection", "Cursor", "Published", "stream"} {
		if resp.StatusCode != 200 || !strings.Contains(body, want) {
			t.Errorf("bridge page: %d, no %q:\n%s", resp.StatusCode, want, body)
		}
	}
	if strings.Contains(body, "is off") {
		t.Errorf("bridge page says the bridge is off:\n%s", body)
	}
}

// TestConsoleHidesBrokerTopics asks for a parked delayed message by its
// position in the schedule topic and by the offsetMsgId its send returned:
// the console, like VIEW_MESSAGE_BY_ID, serves neither.
func TestConsoleHidesBrokerTopics(t *testing.T) {
	env := brokertest.Start(t)
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: "Orders", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}); err != nil {
		t.Fatal(err)
	}
	p, err := client.NewProducer(client.ProducerOptions{Client: client.ClientOptions{NameServers: []string{env.NamesrvAddr},
		InstanceName: brokertest.Name("hide"), Logger: brokertest.Logger()}, Group: "hide-producers"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(context.Background()) })
	res, err := p.SendSync(context.Background(), client.NewMessage("Orders", []byte("parked-secret")).WithDelayLevel(18))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(env.ConsoleHandler("127.0.0.1:0"))
	t.Cleanup(srv.Close)
	for _, path := range []string{
		"/message?topic=" + url.QueryEscape(broker.ScheduleTopic) + "&queue=17&offset=0",
		"/message?id=" + res.OffsetMsgID,
		"/message?key=" + res.MsgID + "&topic=" + url.QueryEscape(broker.ScheduleTopic),
		"/topic?name=" + url.QueryEscape(broker.ScheduleTopic),
	} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "parked-secret") {
			t.Errorf("%s shows the parked message:\n%s", path, b)
		}
	}
	// The message is there, parked.
	if n := env.Store.MaxOffset(broker.ScheduleTopic, 17); n != 1 {
		t.Fatalf("schedule queue 17 holds %d messages, want the parked one", n)
	}
}

// TestConsoleLiteTopic: a LITE topic's page counts its lite topics and
// their messages, which its own queues never hold.
func TestConsoleLiteTopic(t *testing.T) {
	env := brokertest.Start(t)
	if err := env.Broker.CreateTopic(broker.TopicConfig{TopicName: "Sessions", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6, MessageType: broker.MessageTypeLite}); err != nil {
		t.Fatal(err)
	}
	for _, r := range env.Broker.SendLocalBatch([]broker.LocalSend{
		{Topic: "Sessions", LiteTopic: "s1", Body: []byte("a")}, {Topic: "Sessions", LiteTopic: "s2", Body: []byte("b")}, {Topic: "Sessions", LiteTopic: "s1", Body: []byte("c")},
	}) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	srv := httptest.NewServer(env.ConsoleHandler("127.0.0.1:0"))
	t.Cleanup(srv.Close)
	for path, want := range map[string]string{
		"/topic?name=Sessions": "<tr><th>Lite topics</th><td>2</td></tr>\n<tr><th>Messages</th><td>3 retained</td></tr>",
		"/topics?q=Sessions":   `<td class="n">3</td>`,
	} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), want) {
			t.Errorf("%s: no %q in\n%s", path, want, b)
		}
	}
}
