package namesrv_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rmq-go/rmq/core/namesrv"
	"github.com/rmq-go/rmq/core/remoting"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func start(t *testing.T, o namesrv.Options) (*namesrv.Server, string) {
	t.Helper()
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s := namesrv.New(o)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s, ln.Addr().String()
}

func register(t *testing.T, cl *remoting.Client, ns, name, addr string, topics ...remoting.TopicConfig) {
	t.Helper()
	registerAs(t, cl, ns, name, addr, false, topics...)
}

// registerAs registers a broker, marking the registration incremental or
// not.
func registerAs(t *testing.T, cl *remoting.Client, ns, name, addr string, incremental bool, topics ...remoting.TopicConfig) {
	t.Helper()
	body := remoting.RegisterBrokerBody{TopicConfigSerializeWrapper: remoting.TopicConfigWrapper{TopicConfigTable: map[string]remoting.TopicConfig{}}}
	for _, tc := range topics {
		body.TopicConfigSerializeWrapper.TopicConfigTable[tc.TopicName] = tc
	}
	b, _ := json.Marshal(body)
	resp, err := cl.Invoke(context.Background(), ns, remoting.NewRequest(remoting.RegisterBroker, map[string]string{
		"brokerName": name, "brokerAddr": addr, "clusterName": "C", "brokerId": "0", "compressed": "false",
		"incremental": strconv.FormatBool(incremental),
	}, b))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("register: %v %v", resp, err)
	}
}

func route(t *testing.T, cl *remoting.Client, ns, topic string) *remoting.Command {
	t.Helper()
	resp, err := cl.Invoke(context.Background(), ns, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": topic}, nil))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestRouteShape(t *testing.T) {
	clk := &clock{now: time.Now()}
	_, ns := start(t, namesrv.Options{Now: clk.Now})
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	register(t, cl, ns, "broker-a", "127.0.0.1:10911",
		remoting.TopicConfig{TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6},
		remoting.TopicConfig{TopicName: "TBW102", ReadQueueNums: 8, WriteQueueNums: 8, Perm: 7})
	resp := route(t, cl, ns, "T")
	want := `{"orderTopicConf":"","queueDatas":[{"brokerName":"broker-a","readQueueNums":4,"writeQueueNums":4,"perm":6,"topicSysFlag":0}],` +
		`"brokerDatas":[{"cluster":"C","brokerName":"broker-a","brokerAddrs":{"0":"127.0.0.1:10911"}}],"filterServerTable":{}}`
	if resp.Code != remoting.Success || string(resp.Body) != want {
		t.Fatalf("route = %d %s", resp.Code, resp.Body)
	}
	resp = route(t, cl, ns, "missing")
	if resp.Code != remoting.TopicNotExist || len(resp.Body) != 0 || !strings.Contains(resp.Remark, "missing") {
		t.Fatalf("missing topic: %d %q %s", resp.Code, resp.Remark, resp.Body)
	}
	// A retry topic nobody registered yet still resolves to the live masters.
	resp = route(t, cl, ns, "%RETRY%g")
	if resp.Code != remoting.Success || !strings.Contains(string(resp.Body), `"readQueueNums":1,"writeQueueNums":1,"perm":6`) {
		t.Fatalf("retry route: %d %s", resp.Code, resp.Body)
	}
	// Expiry drops the broker and its routes.
	clk.Add(3 * time.Minute)
	if resp := route(t, cl, ns, "T"); resp.Code != remoting.TopicNotExist {
		t.Fatalf("route after expiry: %d", resp.Code)
	}
}

// TestRetryRouteWhileRegistering: a consumer's first heartbeat creates its
// retry topic on every master, and the masters register it one after
// another. A route asked in between still names every live master, the
// ones yet to register with one queue, so the consumer pulls retries from
// all of them from the start and not only after its next route update.
func TestRetryRouteWhileRegistering(t *testing.T) {
	s, ns := start(t, namesrv.Options{})
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	register(t, cl, ns, "broker-a", "127.0.0.1:1")
	register(t, cl, ns, "broker-b", "127.0.0.1:2", remoting.TopicConfig{TopicName: "%RETRY%g", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6})
	r, ok := s.Route("%RETRY%g")
	if !ok || len(r.QueueDatas) != 2 || len(r.BrokerDatas) != 2 {
		t.Fatalf("retry route registered by one of two masters: %+v", r)
	}
	if q := r.QueueDatas[0]; q.BrokerName != "broker-a" || q.ReadQueueNums != 1 || q.Perm != 6 {
		t.Fatalf("the master yet to register: %+v", q)
	}
	if q := r.QueueDatas[1]; q.BrokerName != "broker-b" || q.ReadQueueNums != 2 {
		t.Fatalf("the master that registered: %+v", q)
	}
	if r, ok := s.Route("T"); ok {
		t.Fatalf("a topic no broker registered: %+v", r)
	}
}

func TestTwoBrokers(t *testing.T) {
	s, ns := start(t, namesrv.Options{DisableRetryRoutes: true})
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	register(t, cl, ns, "broker-b", "127.0.0.1:2", remoting.TopicConfig{TopicName: "T", ReadQueueNums: 2, WriteQueueNums: 2, Perm: 6})
	register(t, cl, ns, "broker-a", "127.0.0.1:1", remoting.TopicConfig{TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6},
		remoting.TopicConfig{TopicName: "U", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6})
	r, ok := s.Route("T")
	if !ok || len(r.QueueDatas) != 2 || r.QueueDatas[0].BrokerName != "broker-a" || len(r.BrokerDatas) != 2 {
		t.Fatalf("route %+v", r)
	}
	if got := strings.Join(s.Topics(), ","); got != "T,U" {
		t.Fatalf("topics %s", got)
	}
	if resp := route(t, cl, ns, "%RETRY%g"); resp.Code != remoting.TopicNotExist {
		t.Fatalf("retry route with the option off: %d", resp.Code)
	}
	// Re-registering without U removes it.
	register(t, cl, ns, "broker-a", "127.0.0.1:1", remoting.TopicConfig{TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6})
	if _, ok := s.Route("U"); ok {
		t.Fatal("U still routed after the broker dropped it")
	}
}

func TestRegisterErrors(t *testing.T) {
	_, ns := start(t, namesrv.Options{})
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	resp, err := cl.Invoke(context.Background(), ns, remoting.NewRequest(remoting.RegisterBroker, map[string]string{"brokerName": "x"}, nil))
	if err != nil || resp.Code != remoting.SystemError {
		t.Fatalf("register without an address: %v %v", resp, err)
	}
	resp, _ = cl.Invoke(context.Background(), ns, remoting.NewRequest(remoting.RegisterBroker,
		map[string]string{"brokerName": "x", "brokerAddr": "1.2.3.4:5", "brokerId": "0"}, []byte("{not json")))
	if resp.Code != remoting.SystemError || !strings.Contains(resp.Remark, "bad body") {
		t.Fatalf("bad body: %v", resp)
	}
}

// TestIncrementalRegistrationMerges checks that a registration marked
// incremental adds and updates topics and keeps the others, and that a
// full one replaces the broker's table.
func TestIncrementalRegistrationMerges(t *testing.T) {
	s, ns := start(t, namesrv.Options{DisableRetryRoutes: true})
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	topic := func(name string, queues int) remoting.TopicConfig {
		return remoting.TopicConfig{TopicName: name, ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6}
	}
	queues := func(name string) int {
		r, ok := s.Route(name)
		if !ok {
			return 0
		}
		return r.QueueDatas[0].WriteQueueNums
	}
	const addr = "127.0.0.1:10911"
	// An incremental registration of a broker the name server does not
	// know yet starts its table.
	registerAs(t, cl, ns, "broker-a", addr, true, topic("A", 1))
	register(t, cl, ns, "broker-a", addr, topic("A", 1), topic("B", 1))
	registerAs(t, cl, ns, "broker-a", addr, true, topic("C", 3))
	registerAs(t, cl, ns, "broker-a", addr, true, topic("B", 2))
	if got := s.Topics(); !slices.Equal(got, []string{"A", "B", "C"}) {
		t.Fatalf("after incremental registrations: topics %v, want A B C", got)
	}
	if a, b, c := queues("A"), queues("B"), queues("C"); a != 1 || b != 2 || c != 3 {
		t.Fatalf("queues A %d, B %d, C %d; want 1, 2, 3", a, b, c)
	}
	register(t, cl, ns, "broker-a", addr, topic("A", 4))
	if got := s.Topics(); !slices.Equal(got, []string{"A"}) {
		t.Fatalf("after a full registration: topics %v, want A", got)
	}
	if r := route(t, cl, ns, "C"); r.Code != remoting.TopicNotExist {
		t.Fatalf("route of a topic the full registration left out: %d %s", r.Code, r.Body)
	}
	if q := queues("A"); q != 4 {
		t.Fatalf("A has %d queues after the full registration, want 4", q)
	}
}

// TestNewMasterAddressReplacesOld registers a set's master from a second
// address, as a replicated set's new leader does after a failover: routes
// name only the new address at once, not both until the old one expires.
func TestNewMasterAddressReplacesOld(t *testing.T) {
	s, ns := start(t, namesrv.Options{DisableRetryRoutes: true})
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	tc := remoting.TopicConfig{TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}
	register(t, cl, ns, "set-a", "127.0.0.1:1", tc)
	register(t, cl, ns, "set-b", "127.0.0.1:3", tc)
	register(t, cl, ns, "set-a", "127.0.0.1:2", tc)
	r, ok := s.Route("T")
	if !ok || len(r.BrokerDatas) != 2 {
		t.Fatalf("route %+v", r)
	}
	for _, bd := range r.BrokerDatas {
		want := map[string]string{"set-a": "127.0.0.1:2", "set-b": "127.0.0.1:3"}[bd.BrokerName]
		if len(bd.BrokerAddrs) != 1 || bd.BrokerAddrs[0] != want {
			t.Fatalf("%s: addresses %v, want only %s", bd.BrokerName, bd.BrokerAddrs, want)
		}
	}
}

// TestReplicaRoutesWithoutMaster: a set whose master is gone is routed
// from its replica, readable only.
func TestReplicaRoutesWithoutMaster(t *testing.T) {
	s, ns := start(t, namesrv.Options{DisableRetryRoutes: true})
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	body, _ := json.Marshal(remoting.RegisterBrokerBody{TopicConfigSerializeWrapper: remoting.TopicConfigWrapper{TopicConfigTable: map[string]remoting.TopicConfig{
		"T": {TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6}}}})
	resp, err := cl.Invoke(context.Background(), ns, remoting.NewRequest(remoting.RegisterBroker, map[string]string{
		"brokerName": "set-a", "brokerAddr": "127.0.0.1:2", "clusterName": "C", "brokerId": "2", "compressed": "false"}, body))
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("register replica: %v %v", resp, err)
	}
	r, ok := s.Route("T")
	if !ok || len(r.QueueDatas) != 1 || r.QueueDatas[0].Perm != remoting.PermRead || r.BrokerDatas[0].BrokerAddrs[2] != "127.0.0.1:2" {
		t.Fatalf("route without a master: %v %+v", ok, r)
	}
	register(t, cl, ns, "set-a", "127.0.0.1:1", remoting.TopicConfig{TopicName: "T", ReadQueueNums: 4, WriteQueueNums: 4, Perm: 6})
	if r, _ := s.Route("T"); len(r.QueueDatas) != 1 || r.QueueDatas[0].Perm != 6 || len(r.BrokerDatas[0].BrokerAddrs) != 2 {
		t.Fatalf("route with the master back: %+v", r)
	}
}

// TestGRPCAddrsOnlyWhenAsked: a broker's registered gRPC endpoint is in a
// route answer that asks for it, and nowhere else: the body RocketMQ's
// clients parse keeps its shape.
func TestGRPCAddrsOnlyWhenAsked(t *testing.T) {
	_, ns := start(t, namesrv.Options{})
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	body, _ := json.Marshal(remoting.RegisterBrokerBody{TopicConfigSerializeWrapper: remoting.TopicConfigWrapper{
		TopicConfigTable: map[string]remoting.TopicConfig{"T": {TopicName: "T", ReadQueueNums: 1, WriteQueueNums: 1, Perm: 6}}}})
	for _, b := range []struct{ name, addr, grpc string }{{"broker-a", "127.0.0.1:1", "127.0.0.1:8081"}, {"broker-b", "127.0.0.1:2", ""}} {
		req := remoting.NewRequest(remoting.RegisterBroker, map[string]string{
			"brokerName": b.name, "brokerAddr": b.addr, "clusterName": "C", "brokerId": "0", "compressed": "false",
		}, body)
		if b.grpc != "" {
			req.Set(remoting.RegisterGRPCAddrField, b.grpc)
		}
		if resp, err := cl.Invoke(context.Background(), ns, req); err != nil || resp.Code != remoting.Success {
			t.Fatalf("register %s: %v %v", b.name, resp, err)
		}
	}
	resp := route(t, cl, ns, "T")
	if resp.Code != remoting.Success || strings.Contains(string(resp.Body), "8081") || strings.Contains(string(resp.Body), remoting.RouteGRPCAddrsField) {
		t.Fatalf("route for a client: %d %s", resp.Code, resp.Body)
	}
	asked, err := cl.Invoke(context.Background(), ns, remoting.NewRequest(remoting.GetRouteInfoByTopic, map[string]string{"topic": "T", remoting.RouteGRPCAddrsField: "true"}, nil))
	if err != nil {
		t.Fatal(err)
	}
	var r remoting.TopicRouteData
	if err := json.Unmarshal(asked.Body, &r); err != nil || len(r.BrokerDatas) != 2 {
		t.Fatalf("route asked with gRPC endpoints: %v %s", err, asked.Body)
	}
	if got := r.BrokerDatas[0].GRPCAddrs; len(got) != 1 || got[0] != "127.0.0.1:8081" {
		t.Errorf("broker-a's gRPC endpoints %v, want 0: 127.0.0.1:8081", got)
	}
	if got := r.BrokerDatas[1].GRPCAddrs; got != nil {
		t.Errorf("broker-b registered none, got %v", got)
	}
	// The cluster overview alike.
	for _, ask := range []bool{false, true} {
		ext := map[string]string{}
		if ask {
			ext[remoting.RouteGRPCAddrsField] = "true"
		}
		resp, err := cl.Invoke(context.Background(), ns, remoting.NewRequest(remoting.GetBrokerClusterInfo, ext, nil))
		if err != nil || resp.Code != remoting.Success {
			t.Fatalf("cluster info: %v %v", resp, err)
		}
		if got := strings.Contains(string(resp.Body), `"rmqGrpcAddrs":{"0":"127.0.0.1:8081"}`); got != ask {
			t.Errorf("cluster info asked %v: %s", ask, resp.Body)
		}
	}
}
