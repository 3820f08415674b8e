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

// FuzzDecodeRouteData feeds route bodies, as a name server might send
// them, to the decoder: it must never panic, and what it accepts must
// yield sane queue lists.
func FuzzDecodeRouteData(f *testing.F) {
	f.Add([]byte(`{"queueDatas":[{"brokerName":"b","readQueueNums":4,"writeQueueNums":4,"perm":6}],"brokerDatas":[{"brokerName":"b","brokerAddrs":{"0":"127.0.0.1:10911"}}]}`))
	f.Add([]byte(`{"brokerDatas":[{"brokerName":"b","brokerAddrs":{0:"a:1", 1:"b:2"}}]}`))
	f.Add([]byte(`{0:{1:"x"},"s":"{2:"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		rd, err := decodeRouteData(body)
		if err != nil {
			return
		}
		if len(rd.QueueDatas) > 64 {
			return // the bound is per broker; many brokers cost proportionally more
		}
		r := newTopicRoute("T", rd)
		if len(r.readQueues) > maxRouteQueues*len(rd.QueueDatas) {
			t.Fatalf("%d read queues from %d brokers", len(r.readQueues), len(rd.QueueDatas))
		}
		for _, q := range append(r.readQueues, r.writeQueues...) {
			if q.Topic != "T" || q.QueueID < 0 {
				t.Fatalf("bad queue %v", q)
			}
		}
	})
}
