package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/brokertest"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// grpcSetClient is a RocketMQ 5 client of a set, as the official ones
// behave: it knows the members' gRPC addresses as its access points,
// asks one for the topic's route and sends and receives at the broker
// endpoint the route names. Where the official clients refresh routes
// every 30 s, it asks again after any failure, to keep the test short.
type grpcSetClient struct {
	t      *testing.T
	id     string
	access []string

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	next  int    // the access point to ask first
	route string // the broker endpoint of the topic's queues, or ""
}

func newGRPCSetClient(t *testing.T, id string, rs *replicatedSet) *grpcSetClient {
	c := &grpcSetClient{t: t, id: id, conns: map[string]*grpc.ClientConn{}}
	for _, m := range rs.members {
		c.access = append(c.access, m.grpc)
	}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, cc := range c.conns {
			cc.Close()
		}
	})
	return c
}

func (c *grpcSetClient) client(addr string) pb.MessagingServiceClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	cc := c.conns[addr]
	if cc == nil {
		var err error
		if cc, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			c.t.Fatal(err)
		}
		c.conns[addr] = cc
	}
	return pb.NewMessagingServiceClient(cc)
}

// ctx is a request's context: the client id, a deadline of d.
func (c *grpcSetClient) ctx(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(c.t.Context(), d)
	return metadata.AppendToOutgoingContext(ctx, "x-mq-client-id", c.id, "x-mq-protocol", "v2"), cancel
}

// queryRoute asks addr for topic's route and returns the endpoint its
// queues name.
func (c *grpcSetClient) queryRoute(addr, topic string) (string, *pb.Status, error) {
	ctx, cancel := c.ctx(3 * time.Second)
	defer cancel()
	r, err := c.client(addr).QueryRoute(ctx, &pb.QueryRouteRequest{Topic: &pb.Resource{Name: topic}})
	if err != nil {
		return "", nil, err
	}
	if r.Status.GetCode() != pb.Code_OK || len(r.MessageQueues) == 0 {
		return "", r.Status, nil
	}
	a := r.MessageQueues[0].GetBroker().GetEndpoints().GetAddresses()
	if len(a) != 1 {
		return "", r.Status, fmt.Errorf("route names %v", a)
	}
	return net.JoinHostPort(a[0].Host, strconv.Itoa(int(a[0].Port))), r.Status, nil
}

// endpoint returns the route's broker endpoint, asking the access points
// in turn when there is none.
func (c *grpcSetClient) endpoint(topic string) string {
	c.mu.Lock()
	route, next := c.route, c.next
	c.mu.Unlock()
	if route != "" {
		return route
	}
	for i := range c.access {
		addr := c.access[(next+i)%len(c.access)]
		if ep, _, err := c.queryRoute(addr, topic); err == nil && ep != "" {
			c.mu.Lock()
			c.route, c.next = ep, (next+i)%len(c.access)
			c.mu.Unlock()
			return ep
		}
	}
	return ""
}

// failed forgets the route after a failure at endpoint ep.
func (c *grpcSetClient) failed(ep string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.route == ep {
		c.route = ""
		c.next++
	}
}

// send sends one message synchronously and returns its queue offset if
// it was acknowledged.
func (c *grpcSetClient) send(topic, body string) (int64, bool) {
	ep := c.endpoint(topic)
	if ep == "" {
		return 0, false
	}
	ctx, cancel := c.ctx(3 * time.Second)
	defer cancel()
	tag := "t"
	r, err := c.client(ep).SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{{
		Topic: &pb.Resource{Name: topic}, Body: []byte(body),
		SystemProperties: &pb.SystemProperties{MessageId: body, Tag: &tag, MessageType: pb.MessageType_NORMAL,
			BornTimestamp: timestamppb.Now(), BornHost: "127.0.0.1"},
	}}})
	if err != nil || r.Status.GetCode() != pb.Code_OK || len(r.Entries) != 1 {
		c.failed(ep)
		return 0, false
	}
	return r.Entries[0].Offset, true
}

// pop receives up to n messages for group, invisible for invisible.
func (c *grpcSetClient) pop(group, topic string, n int32, invisible time.Duration) []*pb.Message {
	ep := c.endpoint(topic)
	if ep == "" {
		return nil
	}
	ctx, cancel := c.ctx(5 * time.Second)
	defer cancel()
	st, err := c.client(ep).ReceiveMessage(ctx, &pb.ReceiveMessageRequest{
		Group: &pb.Resource{Name: group}, MessageQueue: &pb.MessageQueue{Topic: &pb.Resource{Name: topic}},
		FilterExpression: &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "*"}, BatchSize: n,
		InvisibleDuration: durationpb.New(invisible), LongPollingTimeout: durationpb.New(time.Second),
	})
	if err != nil {
		c.failed(ep)
		return nil
	}
	var msgs []*pb.Message
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return msgs
		}
		if err != nil {
			c.failed(ep)
			return msgs
		}
		if s := r.GetStatus(); s != nil && s.Code != pb.Code_OK && s.Code != pb.Code_MESSAGE_NOT_FOUND {
			c.failed(ep)
		}
		if m := r.GetMessage(); m != nil {
			msgs = append(msgs, m)
		}
	}
}

// ack acknowledges m and returns the code answered, CODE_UNSPECIFIED
// when no endpoint answered.
func (c *grpcSetClient) ack(group, topic string, m *pb.Message) pb.Code {
	ep := c.endpoint(topic)
	if ep == "" {
		return pb.Code_CODE_UNSPECIFIED
	}
	ctx, cancel := c.ctx(3 * time.Second)
	defer cancel()
	a, err := c.client(ep).AckMessage(ctx, &pb.AckMessageRequest{Group: &pb.Resource{Name: group}, Topic: &pb.Resource{Name: topic},
		Entries: []*pb.AckMessageEntry{{MessageId: m.GetSystemProperties().GetMessageId(), ReceiptHandle: m.GetSystemProperties().GetReceiptHandle()}}})
	if err != nil {
		c.failed(ep)
		return pb.Code_CODE_UNSPECIFIED
	}
	if code := a.Status.GetCode(); code != pb.Code_OK && code != pb.Code_INVALID_RECEIPT_HANDLE {
		c.failed(ep)
	}
	return a.Status.GetCode()
}

// TestReplicatedSetGRPCReplicaNamesLeader: every member of a set serves
// gRPC; a replica's route names the leader's gRPC endpoint, and a send
// to a replica is refused with HA_NOT_AVAILABLE naming the leader, which
// the 5.x clients retry.
func TestReplicatedSetGRPCReplicaNamesLeader(t *testing.T) {
	ns := startNamesrv(t)
	rs := startSetGRPC(t, "set-gr", 3, []string{ns.NamesrvAddr})
	const topic = "GRPCReplica"
	createSetTopic(t, rs, ns.NamesrvAddr, topic)
	leader := rs.leader()
	c := newGRPCSetClient(t, brokertest.Name("gr"), rs)
	for _, m := range rs.members {
		var ep string
		var last any
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) { // a route as the set converges: nothing to await
			e, st, err := c.queryRoute(m.grpc, topic)
			if err == nil && e != "" {
				ep = e
				break
			}
			if last = st; err != nil {
				last = err
			}
			if time.Now().After(deadline) {
				t.Fatalf("no route from %s: %v", m.id, last)
			}
		}
		if ep != leader.grpc {
			t.Fatalf("%s's route names %s; the leader %s serves gRPC at %s", m.id, ep, leader.id, leader.grpc)
		}
		if m == leader {
			continue
		}
		// Always refused; naming the leader's address unless the replica
		// has just missed its heartbeats (a loaded machine): then again.
		var r *pb.SendMessageResponse
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			ctx, cancel := c.ctx(3 * time.Second)
			tag := "t"
			var err error
			r, err = c.client(m.grpc).SendMessage(ctx, &pb.SendMessageRequest{Messages: []*pb.Message{{
				Topic: &pb.Resource{Name: topic}, Body: []byte("to a replica"),
				SystemProperties: &pb.SystemProperties{MessageId: "m-" + m.id, Tag: &tag, MessageType: pb.MessageType_NORMAL,
					BornTimestamp: timestamppb.Now(), BornHost: "127.0.0.1"},
			}}})
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if r.Status.GetCode() != pb.Code_HA_NOT_AVAILABLE {
				t.Fatalf("a send to replica %s: %v", m.id, r.Status)
			}
			if msg := r.Status.GetMessage(); strings.Contains(msg, leader.grpc) && strings.Contains(msg, leader.id) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %s refused a send without naming the leader %s at %s: %v", m.id, leader.id, leader.grpc, r.Status)
			}
		}
		t.Logf("replica %s refused a send: %s", m.id, r.Status.GetMessage())
	}
	if _, ok := c.send(topic, "to the leader"); !ok {
		t.Fatal("the leader refused a send")
	}

	// The official Node.js client, given a replica as its endpoint, is
	// routed to the leader: it sends every message type and consumes. It
	// recalls a delayed message through its endpoint, the replica, which
	// forwards the call to the leader.
	var replica *setMember
	for _, m := range rs.members {
		if m != leader {
			replica = m
		}
	}
	normal, fifo := "GRPCReplicaNode", "GRPCReplicaFifo"
	createSetTopic(t, rs, ns.NamesrvAddr, normal)
	createSetTopic(t, rs, ns.NamesrvAddr, fifo)
	out := runNodeCase(t, "producer-simple", "RMQ_ENDPOINT="+replica.grpc, "RMQ_TOPIC="+normal, "RMQ_FIFO_TOPIC="+fifo, "RMQ_GROUP="+brokertest.Name("grnode"))
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("node output: %s", out)
	}
	// Priority messages too: the replica's route accepts them (the
	// topic's type is replicated) and the leader delivers them highest
	// first.
	prio := "GRPCReplicaPriority"
	createSetTopic(t, rs, ns.NamesrvAddr, prio, "--read-queues", "4", "--write-queues", "4", "--message-type", "PRIORITY")
	out = runNodeCase(t, "priority", "RMQ_ENDPOINT="+replica.grpc, "RMQ_TOPIC="+prio, "RMQ_GROUP="+brokertest.Name("grprio"))
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("node output: %s", out)
	}
	// Lite topics too: the consumer's subscriptions, sent to its endpoint,
	// the replica, are forwarded to the leader, which delivers.
	lite, liteGroup := "GRPCReplicaLite", brokertest.Name("grlite")
	createSetTopic(t, rs, ns.NamesrvAddr, lite, "--read-queues", "1", "--write-queues", "1", "--message-type", "LITE")
	if code, _, errs := runCmd("admin", "groups", "create", "--group", liteGroup, "--orderly", "--namesrv", ns.NamesrvAddr, "--cluster", "DefaultCluster"); code != 0 {
		t.Fatalf("groups create: %s", errs)
	}
	out = runNodeCase(t, "lite", "RMQ_ENDPOINT="+replica.grpc, "RMQ_TOPIC="+lite, "RMQ_GROUP="+liteGroup)
	if !strings.Contains(out, `"ok":true`) {
		t.Fatalf("node output: %s", out)
	}
}

// storedAtOffsets stops the set and checks that each member's store
// holds every acknowledged message (body → queue offset) at its offset.
func (rs *replicatedSet) storedAtOffsets(topic string, acked map[string]int64) {
	t := rs.t
	t.Helper()
	rs.converged()
	for _, m := range rs.members {
		rs.kill(m, syscall.SIGTERM)
	}
	kept := rs.keepDirs()
	for _, m := range rs.members {
		st, err := store.Open(store.Options{Dir: m.dataDir, Logger: brokertest.Logger()})
		if err != nil {
			t.Fatal(err)
		}
		at := map[string]int64{}
		for _, q := range st.Queues() {
			if q.Topic != topic {
				continue
			}
			it := st.NewQueueIter(topic, q.QueueID, store.IterOptions{StopOnCorruption: true})
			for ok := it.SeekGE(0); ok; ok = it.Next() {
				at[string(it.Record().Body())] = it.Offset()
			}
			if err := it.Close(); err != nil {
				rs.reportLogs()
				kept()
				t.Fatalf("member %s: %v", m.id, err)
			}
		}
		st.Close()
		for body, off := range acked {
			if got, ok := at[body]; !ok || got != off {
				rs.reportLogs()
				kept()
				t.Fatalf("member %s: acknowledged %s at offset %d is stored %v (at %d)", m.id, body, off, ok, got)
			}
		}
	}
}

// nodeCase returns the command running a case of the gRPC endpoint's
// Node.js end-to-end cases (internal/grpcserver/testdata/node), with env
// added. Without node or its node_modules it skips, unless
// RMQ_REQUIRE_NODE=1.
func nodeCase(t *testing.T, ctx context.Context, name string, env ...string) *exec.Cmd {
	t.Helper()
	dir := filepath.Join("..", "..", "internal", "grpcserver", "testdata", "node")
	node, err := exec.LookPath("node")
	_, modErr := os.Stat(filepath.Join(dir, "node_modules", "rocketmq-client-nodejs"))
	if err != nil || modErr != nil {
		if os.Getenv("RMQ_REQUIRE_NODE") == "1" {
			t.Fatalf("node or %s/node_modules missing (run npm ci there): %v %v", dir, err, modErr)
		}
		t.Skip("node or its node_modules missing (npm ci in internal/grpcserver/testdata/node)")
	}
	cmd := exec.CommandContext(ctx, node, "e2e.js", name)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"HOME=" + t.TempDir()}, env...)...)
	return cmd
}

// runNodeCase runs a Node.js case (nodeCase) and returns its output.
func runNodeCase(t *testing.T, name string, env ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	out, err := nodeCase(t, ctx, name, env...).CombinedOutput()
	if err != nil {
		t.Fatalf("node e2e.js %s: %v\n%s", name, err, out)
	}
	return string(out)
}

// TestReplicatedSetGRPCKillLeader: RocketMQ 5 clients send
// synchronously to a set of three over gRPC while a consumer group pops
// and acks; the leader is killed with SIGKILL once, with messages of the
// group in flight. Every acknowledged message is stored at the queue
// offset its acknowledgement gave, on every member; the group's offset on
// the new leader is not past a message in flight; an ack on the new
// leader of a handle the old one gave is answered OK while the handle is
// current (the POP state replicates), INVALID_RECEIPT_HANDLE once its
// invisible time passed, and such a message is received again: the group
// receives every acknowledged message at least once.
func TestReplicatedSetGRPCKillLeader(t *testing.T) {
	ns := startNamesrv(t)
	rs := startSetGRPC(t, "set-gk", 3, []string{ns.NamesrvAddr})
	const topic, group = "GRPCKill", "grpc-kill-cg"
	createSetTopic(t, rs, ns.NamesrvAddr, topic)
	before, after := int64(400), int64(400)
	if testing.Short() {
		before, after = 100, 100
	}
	leader := rs.leader()

	var (
		mu       sync.Mutex
		acked    = map[string]int64{} // body → queue offset
		received = map[string]int{}   // by the consumer, which acks
		nAcked   atomic.Int64
		stop     atomic.Bool // senders: stop
		sent     atomic.Bool // the senders stopped
		wg       sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newGRPCSetClient(t, brokertest.Name(fmt.Sprintf("gk-p%d", w)), rs)
			for i := 0; !stop.Load(); i++ {
				body := fmt.Sprintf("w%d-%d", w, i)
				if off, ok := c.send(topic, body); ok {
					mu.Lock()
					acked[body] = off
					mu.Unlock()
					nAcked.Add(1)
				}
			}
		}()
	}
	brokertest.Eventually(t, 60*time.Second, "sends to the leader", func() bool { return nAcked.Load() >= before/2 })

	// Messages in flight at the kill, popped from the old leader and
	// acked on the new one: some invisible for long enough that their
	// handles are still current then, some for 1 s, whose handles are
	// not.
	holder := newGRPCSetClient(t, brokertest.Name("gk-h"), rs)
	var held, expired []*pb.Message
	brokertest.Eventually(t, 30*time.Second, "messages to hold", func() bool {
		held = append(held, holder.pop(group, topic, 8, 20*time.Second)...)
		return len(held) > 0
	})
	brokertest.Eventually(t, 30*time.Second, "messages to hold", func() bool {
		expired = append(expired, holder.pop(group, topic, 8, time.Second)...)
		return len(expired) > 0
	})
	var consumers sync.WaitGroup
	consumers.Add(1)
	go func() {
		defer consumers.Done()
		c := newGRPCSetClient(t, brokertest.Name("gk-c"), rs)
		for t.Context().Err() == nil {
			msgs := c.pop(group, topic, 16, 2*time.Second)
			for _, m := range msgs {
				c.ack(group, topic, m) // one refused comes back
			}
			mu.Lock()
			for _, m := range msgs {
				received[string(m.Body)]++
			}
			done := sent.Load()
			for b := range acked {
				if !done {
					break
				}
				done = received[b] > 0
			}
			mu.Unlock()
			if done {
				return
			}
		}
	}()

	brokertest.Eventually(t, 60*time.Second, "sends to the leader", func() bool { return nAcked.Load() >= before })
	rs.kill(leader, syscall.SIGKILL)
	killedAt, atKill := time.Now(), nAcked.Load()
	// A survivor stops naming the dead leader in its routes once it has
	// not heard from it for a heartbeat timeout, before the election
	// ends, and then names the new one.
	survivor := rs.members[0]
	if survivor == leader {
		survivor = rs.members[1]
	}
	var silent, renamed time.Duration
	for renamed == 0 {
		ep, st, err := holder.queryRoute(survivor.grpc, topic)
		switch {
		case err != nil:
			t.Fatal(err)
		case ep == leader.grpc:
		case ep == "" && st.GetCode() == pb.Code_HA_NOT_AVAILABLE:
			if silent == 0 {
				silent = time.Since(killedAt)
			}
		case ep != "":
			renamed = time.Since(killedAt)
		default:
			t.Fatalf("%s's route: %v", survivor.id, st)
		}
		if time.Since(killedAt) > 60*time.Second {
			t.Fatalf("%s still names the dead leader", survivor.id)
		}
		time.Sleep(20 * time.Millisecond) // polling the route as a client would: no event to await
	}
	var failover time.Duration
	brokertest.Eventually(t, 60*time.Second, "sends to the new leader", func() bool {
		if failover == 0 && nAcked.Load() > atKill {
			failover = time.Since(killedAt)
		}
		return nAcked.Load() >= atKill+after
	})
	stop.Store(true)
	wg.Wait()
	sent.Store(true)
	// The group's offset on the new leader has not passed the messages
	// still in flight (held, invisible for 20 s).
	st, _ := rs.leader().status()
	code, out, errs := runCmd("admin", "--broker", st.Serving, "--json", "consumers", "progress", "--group", group, "--topic", topic)
	var progress struct {
		Queues []struct {
			QueueID        int32 `json:"queueId"`
			ConsumerOffset int64 `json:"consumerOffset"`
		} `json:"queues"`
	}
	if err := json.Unmarshal([]byte(out), &progress); code != 0 || err != nil || len(progress.Queues) == 0 {
		t.Fatalf("consumers progress: exit %d, %v: %s%s", code, err, out, errs)
	}
	for _, m := range held {
		sp := m.GetSystemProperties()
		for _, q := range progress.Queues {
			if q.QueueID == sp.GetQueueId() && q.ConsumerOffset > sp.GetQueueOffset() {
				t.Fatalf("queue %d: the group's offset %d is past %s at %d, in flight", q.QueueID, q.ConsumerOffset, m.Body, sp.GetQueueOffset())
			}
		}
	}
	codes := map[pb.Code]int{}
	for i, m := range append(held, expired...) {
		var code pb.Code
		brokertest.Eventually(t, 30*time.Second, "an answer to an ack of a held message", func() bool {
			code = holder.ack(group, topic, m)
			return code == pb.Code_OK || code == pb.Code_INVALID_RECEIPT_HANDLE
		})
		if i >= len(held) && code != pb.Code_INVALID_RECEIPT_HANDLE {
			t.Fatalf("an ack with a handle whose invisible time passed: %v", code)
		}
		codes[code]++
		if code == pb.Code_OK {
			mu.Lock()
			received[string(m.Body)]++ // acknowledged: it is not delivered again
			mu.Unlock()
		}
	}
	rs.start(leader)
	consumed := make(chan struct{})
	go func() { consumers.Wait(); close(consumed) }()
	brokertest.Wait(t, consumed, 90*time.Second, "the consumer to receive every acknowledged message")

	mu.Lock()
	defer mu.Unlock()
	var again int
	for _, k := range received {
		if k > 1 {
			again++
		}
	}
	rs.storedAtOffsets(topic, acked)
	t.Logf("after the kill, %s stopped naming the dead leader after %v and named the new one after %v", survivor.id, silent.Round(time.Millisecond), renamed.Round(time.Millisecond))
	t.Logf("%d acknowledged (%d before the kill); the new leader took sends %v after the kill; "+
		"the group received %d, %d more than once; acks on the new leader of %d messages popped from the old: %v",
		len(acked), atKill, failover.Round(time.Millisecond), len(received), again, len(held)+len(expired), codes)
}

// TestReplicatedSetGRPCTransferLeader moves a set's leadership twice with
// `broker admin cluster transfer-leader` while RocketMQ 5 clients send
// and a group pops with long polls waiting on the leader: each time the
// old leader's member turns replica on the same gRPC port (its waiting
// receives are answered, and no handler outlives its broker: the members
// run under -race in CI), its route names the new leader, sends go on
// there, and the group receives every acknowledged message.
func TestReplicatedSetGRPCTransferLeader(t *testing.T) {
	ns := startNamesrv(t)
	rs := startSetGRPC(t, "set-gt", 3, []string{ns.NamesrvAddr})
	const topic, group = "GRPCTransfer", "grpc-transfer-cg"
	createSetTopic(t, rs, ns.NamesrvAddr, topic)

	var (
		mu       sync.Mutex
		acked    = map[string]bool{}
		received = map[string]bool{}
		nAcked   atomic.Int64
		stop     atomic.Bool
		sent     atomic.Bool
		wg       sync.WaitGroup
	)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newGRPCSetClient(t, brokertest.Name(fmt.Sprintf("gt-p%d", w)), rs)
			for i := 0; !stop.Load(); i++ {
				body := fmt.Sprintf("w%d-%d", w, i)
				if _, ok := c.send(topic, body); ok {
					mu.Lock()
					acked[body] = true
					mu.Unlock()
					nAcked.Add(1)
				}
			}
		}()
	}
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		c := newGRPCSetClient(t, brokertest.Name("gt-c"), rs)
		for t.Context().Err() == nil {
			msgs := c.pop(group, topic, 16, 2*time.Second)
			for _, m := range msgs {
				c.ack(group, topic, m)
			}
			mu.Lock()
			for _, m := range msgs {
				received[string(m.Body)] = true
			}
			done := sent.Load()
			for b := range acked {
				if !done {
					break
				}
				done = received[b]
			}
			mu.Unlock()
			if done {
				return
			}
		}
	}()

	probe := newGRPCSetClient(t, brokertest.Name("gt-probe"), rs)
	for range 2 {
		at := nAcked.Load()
		brokertest.Eventually(t, 30*time.Second, "sends to the leader", func() bool { return nAcked.Load() >= at+50 })
		old := rs.leader()
		st, _ := old.status()
		if code, out, errs := runCmd("admin", "--broker", st.Serving, "cluster", "transfer-leader"); code != 0 {
			t.Fatalf("transfer-leader: exit %d: %s%s", code, out, errs)
		}
		var next *setMember
		brokertest.Eventually(t, 30*time.Second, "another member leading", func() bool { next = rs.leader(); return next != old })
		brokertest.Eventually(t, 30*time.Second, "the old leader's route naming the new one", func() bool {
			ep, _, err := probe.queryRoute(old.grpc, topic)
			return err == nil && ep == next.grpc
		})
		at = nAcked.Load()
		brokertest.Eventually(t, 60*time.Second, "sends to the new leader", func() bool { return nAcked.Load() >= at+50 })
		t.Logf("leadership moved from %s to %s", old.id, next.id)
	}
	stop.Store(true)
	wg.Wait()
	sent.Store(true)
	brokertest.Wait(t, consumed, 60*time.Second, "the group to receive every acknowledged message")
	mu.Lock()
	defer mu.Unlock()
	for b := range acked {
		if !received[b] {
			t.Fatalf("acknowledged %s never received", b)
		}
	}
	t.Logf("%d acknowledged, every one received", len(acked))
}

// nodeProducer is the Node.js case produce-for running: the official
// client sending synchronously until stop.
type nodeProducer struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	stderr strings.Builder
	lines  chan struct{}

	mu    sync.Mutex
	acked map[string]int64
	last  string
	n     atomic.Int64
}

// startNodeProducer runs produce-for against endpoint, its bodies
// prefix-<i>.
func startNodeProducer(t *testing.T, ctx context.Context, endpoint, topic, prefix string) *nodeProducer {
	t.Helper()
	p := &nodeProducer{acked: map[string]int64{}, lines: make(chan struct{})}
	p.cmd = nodeCase(t, ctx, "produce-for", "RMQ_ENDPOINT="+endpoint, "RMQ_TOPIC="+topic, "RMQ_PREFIX="+prefix)
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			var l struct {
				Acked  string `json:"acked"`
				Offset string `json:"offset"`
			}
			p.mu.Lock()
			if json.Unmarshal(sc.Bytes(), &l) != nil || l.Acked == "" {
				p.last = sc.Text()
			} else if off, err := strconv.ParseInt(l.Offset, 10, 64); err == nil {
				p.acked[l.Acked] = off
				p.n.Add(1)
			} else {
				p.last = "acknowledged without an offset: " + sc.Text()
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// stop ends the sends and returns what was acknowledged.
func (p *nodeProducer) stop(t *testing.T) map[string]int64 {
	t.Helper()
	p.stdin.Close()
	<-p.lines
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("node: %v\n%s", err, p.stderr.String())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !strings.Contains(p.last, `"ok":true`) {
		t.Fatalf("node ended with %q\n%s", p.last, p.stderr.String())
	}
	return p.acked
}

// TestReplicatedSetNodeClientFailover: the official Node.js client, its
// endpoint a replica of a set of three, sends synchronously; the leader
// is killed with SIGKILL, and a new client on the same endpoint, started
// once the set has a new leader, sends again at once (its first route,
// asked of the replica, names the new leader). Every acknowledged message
// is at its queue offset on every member. (The Node client's Producer
// keeps the route of its first send to a topic: one running across the
// failover keeps sending to the old leader, so this test starts another.)
func TestReplicatedSetNodeClientFailover(t *testing.T) {
	ns := startNamesrv(t)
	rs := startSetGRPC(t, "set-gn", 3, []string{ns.NamesrvAddr})
	const topic = "GRPCNodeFailover"
	createSetTopic(t, rs, ns.NamesrvAddr, topic)
	leader := rs.leader()
	access := rs.members[0]
	if access == leader {
		access = rs.members[1]
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	before := startNodeProducer(t, ctx, access.grpc, topic, "before")
	brokertest.Eventually(t, 60*time.Second, "the Node client's sends", func() bool { return before.n.Load() >= 100 })
	acked := before.stop(t)
	rs.kill(leader, syscall.SIGKILL)
	killedAt := time.Now()
	// A client that starts before the replica has stopped naming the
	// dead leader (a heartbeat timeout) would be held there until
	// its route refresh, as one running across the kill is.
	rs.leader()
	elected := time.Since(killedAt)
	after := startNodeProducer(t, ctx, access.grpc, topic, "after")
	brokertest.Eventually(t, 60*time.Second, "a new Node client's sends to the new leader", func() bool { return after.n.Load() > 0 })
	resumed := time.Since(killedAt)
	brokertest.Eventually(t, 30*time.Second, "more sends to the new leader", func() bool { return after.n.Load() >= 100 })
	for body, off := range after.stop(t) {
		acked[body] = off
	}
	rs.start(leader)
	rs.storedAtOffsets(topic, acked)
	t.Logf("%d acknowledged; a new leader served %v after the kill, and a new client's first acknowledgement came %v after the kill (the client's start included)",
		len(acked), elected.Round(time.Millisecond), resumed.Round(time.Millisecond))
}
