package broker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/brokertest"
)

// officialAdminCodes reads, from the official Go client's source in the
// module cache, the request codes its admin package sends: the
// internal.Req… constants admin.go names, and GET_ROUTEINFO_BY_TOPIC,
// which its FetchPublishMessageQueues and FetchClusterList send through
// the client's name-server code.
func officialAdminCodes(t *testing.T) map[string]int16 {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/apache/rocketmq-client-go/v2").Output()
	if err != nil {
		t.Skipf("the official client's source is not at hand (%v)", err)
	}
	dir := strings.TrimSpace(string(out))
	src, err := os.ReadFile(filepath.Join(dir, "admin", "admin.go"))
	if err != nil {
		t.Fatal(err)
	}
	consts, err := os.ReadFile(filepath.Join(dir, "internal", "request.go"))
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]int16{}
	for _, m := range regexp.MustCompile(`(Req\w+)\s*=\s*int16\((\d+)\)`).FindAllStringSubmatch(string(consts), -1) {
		v, _ := strconv.Atoi(m[2])
		values[m[1]] = int16(v)
	}
	codes := map[string]int16{"ReqGetRouteInfoByTopic": values["ReqGetRouteInfoByTopic"]}
	for _, m := range regexp.MustCompile(`internal\.(Req\w+)`).FindAllStringSubmatch(string(src), -1) {
		v, ok := values[m[1]]
		if !ok {
			t.Fatalf("admin.go sends %s, which internal/request.go does not define", m[1])
		}
		codes[m[1]] = v
	}
	return codes
}

// TestOfficialAdminCodesServed lists the request codes the official Go
// client's admin package sends and checks that the broker or the name
// server serves each one, then calls each through the admin API.
func TestOfficialAdminCodesServed(t *testing.T) {
	env := brokertest.Start(t)
	codes := officialAdminCodes(t)
	if len(codes) < 6 {
		t.Fatalf("found only %v in the official admin's source; is the scan broken?", codes)
	}
	// The codes this test knows how to call through the API; a client
	// upgrade that adds one fails here until it is served and called.
	called := []int16{remoting.UpdateAndCreateTopic, remoting.GetAllSubscriptionGroupConfig, remoting.GetAllTopicListFromNameserver,
		remoting.DeleteTopicInBroker, remoting.DeleteTopicInNamesrv, remoting.GetRouteInfoByTopic}
	cl := remoting.NewClient(remoting.ClientOptions{Logger: brokertest.Logger()})
	defer cl.Close()
	for name, code := range codes {
		if !slices.Contains(called, code) {
			t.Errorf("the official admin sends %s (%d), which this test does not call", name, code)
		}
		served := false
		for _, addr := range []string{env.BrokerAddr, env.NamesrvAddr} {
			r, err := cl.Invoke(context.Background(), addr, remoting.NewRequest(code, map[string]string{}, nil))
			if err != nil {
				t.Fatalf("%s to %s: %v", name, addr, err)
			}
			served = served || r.Code != remoting.RequestCodeNotSupported
		}
		if !served {
			t.Errorf("neither the broker nor the name server serves %s (%d)", name, code)
		}
	}

	a, err := admin.NewAdmin(admin.WithResolver(primitive.NewPassthroughResolver([]string{env.NamesrvAddr})))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topic, group := brokertest.Name("AdminCodes"), brokertest.Name("admincodes")
	if err := a.CreateTopic(ctx, admin.WithTopicCreate(topic), admin.WithBrokerAddrCreate(env.BrokerAddr),
		admin.WithReadQueueNums(3), admin.WithWriteQueueNums(3)); err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	heartbeatConsumer(t, cl, env, group)
	groups, err := a.GetAllSubscriptionGroup(ctx, env.BrokerAddr, 3*time.Second)
	if err != nil {
		t.Fatalf("GetAllSubscriptionGroup: %v", err)
	}
	if _, ok := groups.SubscriptionGroupTable[group]; !ok {
		t.Errorf("GetAllSubscriptionGroup lacks %s", group)
	}
	topics, err := a.FetchAllTopicList(ctx)
	if err != nil || !slices.Contains(topics.TopicList, topic) {
		t.Errorf("FetchAllTopicList: %v, %v", topics, err)
	}
	mqs, err := a.FetchPublishMessageQueues(ctx, topic)
	if err != nil || len(mqs) != 3 {
		t.Errorf("FetchPublishMessageQueues: %v, %v", mqs, err)
	}
	clusters, err := a.FetchClusterList(topic)
	if err != nil || len(clusters) != 1 {
		t.Errorf("FetchClusterList: %v, %v", clusters, err)
	}
	if err := a.DeleteTopic(ctx, admin.WithTopicDelete(topic), admin.WithBrokerAddrDelete(env.BrokerAddr),
		admin.WithNameSrvAddr([]string{env.NamesrvAddr})); err != nil {
		t.Fatalf("DeleteTopic: %v", err)
	}
	if _, ok := env.Broker.Topics()[topic]; ok {
		t.Error("DeleteTopic left the topic")
	}
}
