package client

import (
	"context"
	"errors"
	"testing"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// testEnv is a broker and name server on port 0, and client options that
// point at them with an instance name of the test's own.
type testEnv struct {
	*brokertest.Env
}

func startBroker(t testing.TB, mutate ...func(*server.Config)) testEnv {
	t.Helper()
	return testEnv{brokertest.Start(t, mutate...)}
}

// options returns ClientOptions with a fresh instance name.
func (e testEnv) options() ClientOptions {
	return ClientOptions{NameServers: []string{e.NamesrvAddr}, InstanceName: brokertest.Name("c"), Logger: brokertest.Logger()}
}

// createTopic creates topic with n queues on the broker.
func (e testEnv) createTopic(t testing.TB, topic string, n int) {
	t.Helper()
	if err := e.Broker.CreateTopic(broker.TopicConfig{TopicName: topic, ReadQueueNums: n, WriteQueueNums: n, Perm: 6}); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

func TestInstanceSharedAndReleased(t *testing.T) {
	e := startBroker(t)
	opts := e.options()
	a, err := acquireInstance(opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := acquireInstance(opts)
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two instances for one client id")
	}
	other := opts
	other.NameServers = []string{"127.0.0.1:1"}
	if _, err := acquireInstance(other); err == nil {
		t.Fatal("acquire with other name servers under the same id: no error")
	}
	a.release()
	b.release()
	c, err := acquireInstance(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.release()
	if c == a {
		t.Fatal("a released instance was handed out again")
	}
}

func TestInstanceRoute(t *testing.T) {
	e := startBroker(t)
	topic := brokertest.Name("T")
	e.createTopic(t, topic, 3)
	in, err := acquireInstance(e.options())
	if err != nil {
		t.Fatal(err)
	}
	defer in.release()
	r, err := in.route(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.writeQueues) != 3 || len(r.readQueues) != 3 {
		t.Fatalf("queues: write %v read %v", r.writeQueues, r.readQueues)
	}
	if _, err := in.updateRoute(context.Background(), "NoSuchTopic"); !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("missing topic: %v", err)
	}
	max, err := in.maxOffset(context.Background(), r.readQueues[0])
	if err != nil || max != 0 {
		t.Fatalf("max offset of an empty queue: %d, %v", max, err)
	}
}

func TestQuoteIntKeys(t *testing.T) {
	in := `{"brokerDatas":[{"brokerName":"b","brokerAddrs":{0:"1.2.3.4:10911", 1:"x:1"}}],"s":"{0:\"q\"}"}`
	rd, err := decodeRouteData([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if got := rd.BrokerDatas[0].BrokerAddrs; got[0] != "1.2.3.4:10911" || got[1] != "x:1" {
		t.Fatalf("brokerAddrs %v", got)
	}
}
