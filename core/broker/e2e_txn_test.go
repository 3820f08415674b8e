package broker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/brokertest"
	"github.com/rmq-go/rmq/internal/server"
)

// txnListener is a producer's local transactions, decided by the body's
// prefix:
//
//	commit-…          committed at once
//	rollback-…        rolled back at once
//	check-commit-…    unknown; committed at a check once released
//	check-rollback-…  unknown; rolled back at a check once released
//	unknown-…         unknown, at every check
type txnListener struct {
	released atomic.Bool
	mu       sync.Mutex
	checks   map[string][]int // body → TRANSACTION_CHECK_TIMES of each check received
}

func newTxnListener() *txnListener { return &txnListener{checks: map[string][]int{}} }

func (l *txnListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	switch body := string(m.Body); {
	case strings.HasPrefix(body, "commit-"):
		return primitive.CommitMessageState
	case strings.HasPrefix(body, "rollback-"):
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState
}

func (l *txnListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	body := string(m.Body)
	n, _ := strconv.Atoi(m.GetProperty(message.PropertyTransactionCheckTimes))
	l.mu.Lock()
	l.checks[body] = append(l.checks[body], n)
	l.mu.Unlock()
	if !l.released.Load() {
		return primitive.UnkonwnState
	}
	switch {
	case strings.HasPrefix(body, "check-commit-"):
		return primitive.CommitMessageState
	case strings.HasPrefix(body, "check-rollback-"):
		return primitive.RollbackMessageState
	}
	return primitive.UnkonwnState
}

// checked returns the check counts each body saw.
func (l *txnListener) checked() map[string][]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]int{}
	for k, v := range l.checks {
		out[k] = slices.Clone(v)
	}
	return out
}

func startTxnProducer(t *testing.T, env *brokertest.Env, group string, l primitive.TransactionListener) rocketmq.TransactionProducer {
	t.Helper()
	p, err := rocketmq.NewTransactionProducer(l,
		producer.WithNsResolver(env.Resolver()),
		producer.WithGroupName(group),
		producer.WithInstanceName(brokertest.Name("txnproducer")),
		producer.WithRetry(2),
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown() })
	return p
}

// sendTxn sends one transactional message and checks the reply names the
// stored half message.
func sendTxn(t *testing.T, env *brokertest.Env, p rocketmq.TransactionProducer, topic, body string) *primitive.TransactionSendResult {
	t.Helper()
	res, err := p.SendMessageInTransaction(context.Background(), primitive.NewMessage(topic, []byte(body)))
	if err != nil {
		t.Fatalf("send %s: %v", body, err)
	}
	if res.Status != primitive.SendOK {
		t.Fatalf("send %s: status %v", body, res.Status)
	}
	if len(res.OffsetMsgID) != 32 {
		t.Fatalf("send %s: msgId %q is not 32 hex characters", body, res.OffsetMsgID)
	}
	_, off, err := message.ParseOffsetMsgID(res.OffsetMsgID)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := env.Store.ReadRecordAt(off)
	if err != nil {
		t.Fatalf("send %s: the msgId's offset %d: %v", body, off, err)
	}
	if string(rec.Topic()) != broker.HalfTopic || string(rec.Body()) != body || rec.Properties().Get(message.PropertyRealTopic) != topic {
		t.Fatalf("send %s: the msgId names %s %q", body, rec.Topic(), rec.Body())
	}
	return res
}

// queueRecords reads every record of a queue from the store.
func queueRecords(t *testing.T, env *brokertest.Env, topic string, q int32) []message.Record {
	t.Helper()
	var out []message.Record
	it := env.Store.NewQueueIter(topic, q, store.IterOptions{StopOnCorruption: true})
	for ok := it.SeekGE(env.Store.MinOffset(topic, q)); ok; ok = it.Next() {
		out = append(out, slices.Clone(it.Record()))
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkCommitted reads the real topic's queue and checks it holds exactly
// want, once each, as committed transactional messages.
func checkCommitted(t *testing.T, env *brokertest.Env, topic string, want []string) {
	t.Helper()
	var got []string
	for _, r := range queueRecords(t, env, topic, 0) {
		got = append(got, string(r.Body()))
		p := r.Properties()
		for _, k := range []string{message.PropertyTransactionPrepared, message.PropertyRealTopic, message.PropertyRealQueueID, message.PropertyTransactionCheckTimes} {
			if p.Has(k) {
				t.Errorf("%s: committed message keeps %s", r.Body(), k)
			}
		}
		if p.Get(message.PropertyUniqKey) == "" || p.Get(message.PropertyProducerGroup) == "" {
			t.Errorf("%s: committed message lost UNIQ_KEY or PGROUP: %q", r.Body(), p)
		}
		if r.SysFlag()&message.SysFlagTxMask != message.SysFlagTxCommit {
			t.Errorf("%s: sysFlag %#x, want the commit type", r.Body(), r.SysFlag())
		}
		half, err := env.Store.ReadRecordAt(r.PreparedTransactionOffset())
		if err != nil || string(half.Topic()) != broker.HalfTopic || !slices.Equal(half.Body(), r.Body()) {
			t.Errorf("%s: prepared offset %d does not name its half message (%v)", r.Body(), r.PreparedTransactionOffset(), err)
		}
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Fatalf("%s holds\n%v\nwant\n%v", topic, got, want)
	}
}

func txnBodies(kind string, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("%s-%d", kind, i))
	}
	return out
}

// TestTxnCommitRollbackAndCheck sends 30 transactional messages with the
// official transaction producer: committed at once, rolled back at once,
// and left unknown to be committed or rolled back when checked. The broker
// restarts while the unknown ones are being checked. Every committed
// message is delivered exactly once, no rolled-back one ever is, and the
// check counts carry on across the restart.
func TestTxnCommitRollbackAndCheck(t *testing.T) {
	env := brokertest.Start(t, func(c *server.Config) {
		c.Broker.TxnTimeout = 300 * time.Millisecond
		c.Broker.TxnCheckInterval = time.Second
	})
	topic := brokertest.Name("Txn")
	createTopic(t, env, topic, 1)
	l := newTxnListener()
	p := startTxnProducer(t, env, brokertest.Name("txn"), l)

	commit, rollback := txnBodies("commit", 8), txnBodies("rollback", 7)
	checkCommit, checkRollback := txnBodies("check-commit", 8), txnBodies("check-rollback", 7)
	var all []string
	for i := 0; i < 8; i++ {
		for _, kind := range [][]string{commit, rollback, checkCommit, checkRollback} {
			if i < len(kind) {
				all = append(all, kind[i])
			}
		}
	}
	for _, body := range all {
		res := sendTxn(t, env, p, topic, body)
		if want := l.ExecuteLocalTransaction(primitive.NewMessage(topic, []byte(body))); res.State != want {
			t.Fatalf("%s: local state %v", body, res.State)
		}
	}
	unknown := append(slices.Clone(checkCommit), checkRollback...)
	brokertest.Eventually(t, 30*time.Second, "every unknown transaction to be checked twice", func() bool {
		seen := l.checked()
		for _, body := range unknown {
			if len(seen[body]) < 2 {
				return false
			}
		}
		return true
	})
	if n := env.Broker.PendingTransactions(); n != len(unknown) {
		t.Fatalf("%d transactions pending, want %d", n, len(unknown))
	}
	var m broker.Metrics
	env.Broker.Metrics(&m)
	if m.TxnPending != len(unknown) || m.TxnChecks < int64(2*len(unknown)) {
		t.Fatalf("metrics: %d pending, %d checks sent; want %d, at least %d", m.TxnPending, m.TxnChecks, len(unknown), 2*len(unknown))
	}
	checkCommitted(t, env, topic, commit)
	before := l.checked()
	for body, counts := range before {
		if !slices.IsSorted(counts) || counts[0] != 1 {
			t.Errorf("%s: check counts %v, want 1, 2, …", body, counts)
		}
		if !slices.Contains(unknown, body) {
			t.Errorf("%s was checked though its producer decided it", body)
		}
	}

	env = env.Restart(t)
	if n := env.Broker.PendingTransactions(); n != len(unknown) {
		t.Fatalf("after the restart %d transactions pending, want %d", n, len(unknown))
	}
	l.released.Store(true)
	// The producer reconnects with its next send; its END_TRANSACTION
	// makes it reachable for checks.
	after := txnBodies("commit-after-restart", 1)
	sendTxn(t, env, p, topic, after[0])
	brokertest.Eventually(t, 30*time.Second, "the checks to resolve every transaction", func() bool {
		return env.Broker.PendingTransactions() == 0
	})
	committed := slices.Concat(commit, checkCommit, after)
	checkCommitted(t, env, topic, committed)
	seen := l.checked()
	for _, body := range unknown {
		last := before[body][len(before[body])-1]
		if got := seen[body][len(before[body]):]; len(got) == 0 || got[0] <= last {
			t.Errorf("%s: checked %v before the restart and %v after; the count went back", body, before[body], got)
		}
	}

	col := newCollector(len(committed))
	group := brokertest.Name("cg")
	c := env.PushConsumer(t, group)
	if err := c.Subscribe(topic, consumer.MessageSelector{}, col.listener(bodyKey)); err != nil {
		t.Fatal(err)
	}
	env.StartConsumer(t, c, group, true, topic)
	brokertest.Wait(t, col.done, 30*time.Second, "every committed message")
	col.mu.Lock()
	defer col.mu.Unlock()
	if col.dup > 0 {
		t.Errorf("%d messages delivered twice", col.dup)
	}
	for body, m := range col.seen {
		if !slices.Contains(committed, body) {
			t.Errorf("delivered %q, which was not committed", body)
		}
		if m.TransactionId != "" || m.GetProperty(message.PropertyTransactionPrepared) != "" {
			t.Errorf("%s is delivered as a half message", body)
		}
	}
}

// TestTxnCheckLimitDiscards leaves transactions unknown at every check:
// after the check limit the broker gives up, keeps a copy in
// TRANS_CHECK_MAX_TIME_TOPIC and never delivers them.
func TestTxnCheckLimitDiscards(t *testing.T) {
	env := brokertest.Start(t, func(c *server.Config) {
		c.Broker.TxnTimeout = 200 * time.Millisecond
		c.Broker.TxnCheckInterval = 300 * time.Millisecond
		c.Broker.TxnCheckMax = 3
	})
	topic := brokertest.Name("TxnLimit")
	createTopic(t, env, topic, 1)
	l := newTxnListener()
	p := startTxnProducer(t, env, brokertest.Name("txn"), l)
	bodies := txnBodies("unknown", 2)
	for _, body := range bodies {
		sendTxn(t, env, p, topic, body)
	}
	// The broker gives up after sending the third check; the client
	// answers each check on its own goroutine, so wait for it to have
	// seen the third too.
	brokertest.Eventually(t, 30*time.Second, "the broker to give up after three checks", func() bool {
		if env.Broker.PendingTransactions() != 0 {
			return false
		}
		for _, body := range bodies {
			if len(l.checked()[body]) < 3 {
				return false
			}
		}
		return true
	})
	for _, body := range bodies {
		if got := l.checked()[body]; !slices.Equal(got, []int{1, 2, 3}) {
			t.Errorf("%s: checks %v, want [1 2 3]", body, got)
		}
	}
	checkCommitted(t, env, topic, nil)
	var kept []string
	for _, r := range queueRecords(t, env, broker.TxnCheckMaxTopic, 0) {
		kept = append(kept, string(r.Body()))
	}
	slices.Sort(kept)
	if !slices.Equal(kept, bodies) {
		t.Errorf("%s holds %v, want %v", broker.TxnCheckMaxTopic, kept, bodies)
	}
}

// rawTxn sends a half message over the raw protocol and returns its
// commit-log offset.
func rawTxn(t *testing.T, cl *remoting.Client, env *brokertest.Env, topic, group, body string, props map[string]string) int64 {
	t.Helper()
	all := map[string]string{message.PropertyTransactionPrepared: "true", message.PropertyProducerGroup: group,
		message.PropertyUniqKey: message.NewUniqID()}
	for k, v := range props {
		all[k] = v
	}
	req := remoting.NewRequest(remoting.SendMessage, map[string]string{
		"producerGroup": group, "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "0", "sysFlag": strconv.Itoa(int(message.SysFlagTxPrepared)), "bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10),
		"flag": "0", "properties": string(message.EncodeProperties(all)), "reconsumeTimes": "0", "unitMode": "false",
		"maxReconsumeTimes": "0", "batch": "false",
	}, []byte(body))
	resp, err := cl.Invoke(context.Background(), env.BrokerAddr, req)
	if err != nil || resp.Code != remoting.Success {
		t.Fatalf("send half message: %v %v", resp, err)
	}
	_, off, err := message.ParseOffsetMsgID(resp.Get("msgId"))
	if err != nil {
		t.Fatal(err)
	}
	return off
}

func rawEnd(t *testing.T, cl *remoting.Client, env *brokertest.Env, group string, off int64, typ int) *remoting.Command {
	t.Helper()
	resp, err := cl.Invoke(context.Background(), env.BrokerAddr, remoting.NewRequest(remoting.EndTransaction, map[string]string{
		"producerGroup": group, "tranStateTableOffset": "0", "commitLogOffset": strconv.FormatInt(off, 10),
		"commitOrRollback": strconv.Itoa(typ), "fromTransactionCheck": "false", "msgId": "", "transactionId": "",
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestTxnEndIsIdempotent ends transactions over the raw protocol: repeated
// and contradicting ends change nothing after the first, ends for unknown
// offsets are answered without error, a foreign producer group is
// refused, and a committed delayed message goes through the schedule.
func TestTxnEndIsIdempotent(t *testing.T) {
	env := brokertest.Start(t, func(c *server.Config) { c.Broker.DelayLevels = []time.Duration{time.Second} })
	topic := brokertest.Name("TxnEnd")
	createTopic(t, env, topic, 1)
	cl := remoting.NewClient(remoting.ClientOptions{})
	defer cl.Close()
	const group = "pg"

	a := rawTxn(t, cl, env, topic, group, "a", nil)
	for i, typ := range []int{8, 8, 12} {
		if resp := rawEnd(t, cl, env, group, a, typ); resp.Code != remoting.Success {
			t.Fatalf("end %d of a: %d %s", i, resp.Code, resp.Remark)
		}
	}
	b := rawTxn(t, cl, env, topic, group, "b", nil)
	if resp := rawEnd(t, cl, env, "other", b, 8); resp.Code != remoting.NoPermission {
		t.Fatalf("a foreign group's commit answered %d %s", resp.Code, resp.Remark)
	}
	for _, typ := range []int{12, 8, 12} {
		rawEnd(t, cl, env, group, b, typ)
	}
	if resp := rawEnd(t, cl, env, group, 123456789, 8); resp.Code != remoting.Success || resp.Remark == "" {
		t.Fatalf("end for an unknown offset answered %d %q", resp.Code, resp.Remark)
	}
	if resp := rawEnd(t, cl, env, group, a, 0); resp.Code != remoting.Success {
		t.Fatalf("an unknown state answered %d", resp.Code)
	}
	checkCommitted(t, env, topic, []string{"a"})

	// A committed delayed message waits in the schedule first.
	scheduled := env.Store.MaxOffset(broker.ScheduleTopic, 0)
	d := rawTxn(t, cl, env, topic, group, "delayed", map[string]string{message.PropertyDelayLevel: "1"})
	rawEnd(t, cl, env, group, d, 8)
	if got := env.Store.MaxOffset(broker.ScheduleTopic, 0); got != scheduled+1 {
		t.Fatalf("the schedule holds %d messages, want %d", got, scheduled+1)
	}
	brokertest.Eventually(t, 10*time.Second, "the delayed commit to be delivered", func() bool {
		return env.Store.MaxOffset(topic, 0) == 2
	})
	if n := env.Broker.PendingTransactions(); n != 0 {
		t.Fatalf("%d transactions pending", n)
	}
}

// switchPolicy fails while failing is set, and otherwise defers to next.
type switchPolicy struct {
	failing atomic.Bool
	calls   atomic.Int32
	next    broker.TxnPolicy
}

func (p *switchPolicy) Decide(ctx context.Context, now time.Time, batch []broker.HalfMessage, out []broker.TxnDecision) error {
	p.calls.Add(1)
	if p.failing.Load() {
		return errors.New("policy unavailable")
	}
	return p.next.Decide(ctx, now, batch, out)
}

// commitPolicy commits every half message without asking.
type commitPolicy struct{}

func (commitPolicy) Decide(_ context.Context, _ time.Time, batch []broker.HalfMessage, out []broker.TxnDecision) error {
	for i := range batch {
		out[i] = broker.TxnDecision{Action: broker.TxnCommit}
	}
	return nil
}

// TestTxnPolicies checks the policy hook: a failing policy leaves the
// transaction unknown (no check, no outcome) until it works again, and a
// per-group policy can resolve transactions without asking the producer.
func TestTxnPolicies(t *testing.T) {
	flaky := &switchPolicy{next: broker.DefaultTxnPolicy{Timeout: 100 * time.Millisecond, Interval: time.Second, Max: 5}}
	flaky.failing.Store(true)
	flakyGroup, autoGroup := brokertest.Name("flaky"), brokertest.Name("auto")
	env := brokertest.Start(t, func(c *server.Config) {
		c.Broker.TxnTimeout = 100 * time.Millisecond
		c.Broker.TxnCheckInterval = 200 * time.Millisecond
		c.Broker.TxnPolicies = map[string]broker.TxnPolicy{flakyGroup: flaky, autoGroup: commitPolicy{}}
	})
	topic := brokertest.Name("TxnPolicy")
	createTopic(t, env, topic, 1)
	fl, al := newTxnListener(), newTxnListener()
	fl.released.Store(true)
	fp := startTxnProducer(t, env, flakyGroup, fl)
	ap := startTxnProducer(t, env, autoGroup, al)
	sendTxn(t, env, fp, topic, "check-commit-flaky")
	sendTxn(t, env, ap, topic, "unknown-auto")

	brokertest.Eventually(t, 30*time.Second, "the failing policy to be asked three times", func() bool {
		return flaky.calls.Load() >= 3
	})
	checkCommitted(t, env, topic, []string{"unknown-auto"})
	if n := env.Broker.PendingTransactions(); n != 1 {
		t.Fatalf("%d transactions pending, want the flaky group's one", n)
	}
	if got := fl.checked(); len(got) != 0 {
		t.Fatalf("checks sent while the policy failed: %v", got)
	}
	if got := al.checked(); len(got) != 0 {
		t.Fatalf("the committing policy asked the producer: %v", got)
	}
	flaky.failing.Store(false)
	brokertest.Eventually(t, 30*time.Second, "the check to commit the flaky group's message", func() bool {
		return env.Broker.PendingTransactions() == 0
	})
	checkCommitted(t, env, topic, []string{"unknown-auto", "check-commit-flaky"})
}
