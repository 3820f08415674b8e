package broker

import (
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
)

// DefaultQueueLockExpiry is how long a queue lock lives without renewal,
// as in RocketMQ (rocketmq.broker.rebalance.lockMaxLiveTime).
const DefaultQueueLockExpiry = 60 * time.Second

// lockKey names a queue within a group's lock table. The broker name is
// left out: every queue a client locks here is one of this broker's.
type lockKey struct {
	topic string
	queue int32
}

// queueLock is one queue's lock.
type queueLock struct {
	clientID string
	conn     *remoting.Conn // the connection the holder locked on
	renewed  time.Time
	// waiters are the clients refused this queue while it was held; they
	// are told to rebalance when it becomes free.
	waiters map[string]*remoting.Conn
}

// lockTable holds the queue locks of orderly consumer groups: a queue is
// locked by at most one client id of a group at a time (spec §11).
type lockTable struct {
	log        *slog.Logger
	brokerName string        // names the queues holders reports
	expiry     time.Duration // Options.QueueLockExpiry
	// wakeGroup tells a group's refused clients that queues came free;
	// it is called with no lock held.
	wakeGroup func(group string, conns []*remoting.Conn)
	// held counts the locks in the table, so pulls of groups without
	// orderly consumers skip the table.
	held atomic.Int64
	mu   struct {
		sync.Mutex
		groups map[string]map[lockKey]*queueLock
	}
}

// newLockTable returns an empty table whose locks live expiry without
// renewal; wakeGroup is told of the waiters of a released lock.
func newLockTable(log *slog.Logger, brokerName string, expiry time.Duration, wakeGroup func(group string, conns []*remoting.Conn)) *lockTable {
	t := &lockTable{log: log, brokerName: brokerName, expiry: expiry, wakeGroup: wakeGroup}
	t.mu.groups = map[string]map[lockKey]*queueLock{}
	return t
}

// wakeList gathers the waiters to notify per group once the lock is
// released.
type wakeList map[string][]*remoting.Conn

func (w wakeList) addLocked(group string, l *queueLock) {
	for _, c := range l.waiters {
		w[group] = append(w[group], c)
	}
}

func (t *lockTable) wake(w wakeList) {
	for group, conns := range w {
		t.wakeGroup(group, conns)
	}
}

// lock grants clientID every queue of mqs that is free, already its own,
// or held by a lock that expired, and returns those it now holds, in
// request order.
func (t *lockTable) lock(group, clientID string, c *remoting.Conn, mqs []Queue, now time.Time) []Queue {
	out := make([]Queue, 0, len(mqs))
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.mu.groups[group]
	for _, mq := range mqs {
		k := lockKey{mq.Topic, mq.QueueID}
		l := g[k]
		switch {
		case l == nil:
			if g == nil {
				g = map[lockKey]*queueLock{}
				t.mu.groups[group] = g
			}
			g[k] = &queueLock{clientID: clientID, conn: c, renewed: now}
			t.held.Add(1)
			t.log.Debug("queue locked", "group", group, "topic", mq.Topic, "queue", mq.QueueID, "client", clientID)
		case l.clientID == clientID:
			l.conn, l.renewed = c, now
			delete(l.waiters, clientID)
		case now.Sub(l.renewed) >= t.expiry:
			t.log.Info("queue lock handed over", "group", group, "topic", mq.Topic, "queue", mq.QueueID,
				"from", l.clientID, "to", clientID, "reason", "expired")
			delete(l.waiters, clientID)
			l.clientID, l.conn, l.renewed = clientID, c, now
		default:
			if l.waiters == nil {
				l.waiters = map[string]*remoting.Conn{}
			}
			l.waiters[clientID] = c
			continue
		}
		out = append(out, mq)
	}
	return out
}

// unlock releases the queues of mqs that clientID holds.
func (t *lockTable) unlock(group, clientID string, mqs []Queue) {
	w := wakeList{}
	t.mu.Lock()
	g := t.mu.groups[group]
	for _, mq := range mqs {
		k := lockKey{mq.Topic, mq.QueueID}
		if l := g[k]; l != nil && l.clientID == clientID {
			t.removeLocked(group, g, k, l, "unlocked", w)
		}
	}
	t.mu.Unlock()
	t.wake(w)
}

// removeLocked drops a lock and queues its waiters for a wake-up.
func (t *lockTable) removeLocked(group string, g map[lockKey]*queueLock, k lockKey, l *queueLock, reason string, w wakeList) {
	delete(g, k)
	if len(g) == 0 {
		delete(t.mu.groups, group)
	}
	t.held.Add(-1)
	w.addLocked(group, l)
	t.log.Info("queue lock released", "group", group, "topic", k.topic, "queue", k.queue, "client", l.clientID, "reason", reason)
}

// releaseIf drops every lock for which drop reports true.
func (t *lockTable) releaseIf(reason string, drop func(group string, l *queueLock) bool) {
	if t.held.Load() == 0 {
		return
	}
	w := wakeList{}
	t.mu.Lock()
	for group, g := range t.mu.groups {
		for k, l := range g {
			if drop(group, l) {
				t.removeLocked(group, g, k, l, reason, w)
			} else if l.waiters != nil {
				for id, wc := range l.waiters {
					if isClosed(wc) {
						delete(l.waiters, id)
					}
				}
			}
		}
	}
	t.mu.Unlock()
	t.wake(w)
}

// releaseConn drops the locks taken on a closed connection; the holder's
// queues can go to another client at once instead of after the expiry.
func (t *lockTable) releaseConn(c *remoting.Conn) {
	t.releaseIf("connection closed", func(_ string, l *queueLock) bool { return l.conn == c })
}

// releaseClients drops the locks of clients whose heartbeat expired.
func (t *lockTable) releaseClients(ids []string) {
	if len(ids) == 0 {
		return
	}
	t.releaseIf("heartbeat expired", func(_ string, l *queueLock) bool { return slices.Contains(ids, l.clientID) })
}

// sweep drops expired locks; their waiters are told to rebalance.
func (t *lockTable) sweep(now time.Time) {
	t.releaseIf("expired", func(_ string, l *queueLock) bool { return now.Sub(l.renewed) >= t.expiry })
}

// sweepGap is how often sweep runs: often enough that a waiter learns of
// an expired lock within a quarter of the expiry.
func (t *lockTable) sweepGap() time.Duration {
	return max(min(t.expiry/4, 5*time.Second), 10*time.Millisecond)
}

// holderElsewhere reports the client that holds a group's queue through
// a connection other than c, if its lock is live.
func (t *lockTable) holderElsewhere(group, topic string, queue int32, c *remoting.Conn, now time.Time) (string, bool) {
	if t.held.Load() == 0 {
		return "", false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	l := t.mu.groups[group][lockKey{topic, queue}]
	if l == nil || l.conn == c || now.Sub(l.renewed) >= t.expiry {
		return "", false
	}
	return l.clientID, true
}

// anyLive reports whether group holds a lock not yet expired: whether
// it consumes orderly here.
func (t *lockTable) anyLive(group string, now time.Time) bool {
	if t.held.Load() == 0 {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, l := range t.mu.groups[group] {
		if now.Sub(l.renewed) < t.expiry {
			return true
		}
	}
	return false
}

// holders returns a copy of a group's lock table: queue → client id.
func (t *lockTable) holders(group string, now time.Time) map[Queue]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[Queue]string{}
	for k, l := range t.mu.groups[group] {
		if now.Sub(l.renewed) < t.expiry {
			out[Queue{Topic: k.topic, BrokerName: t.brokerName, QueueID: k.queue}] = l.clientID
		}
	}
	return out
}

func isClosed(c *remoting.Conn) bool {
	select {
	case <-c.Done():
		return true
	default:
		return false
	}
}

func (b *Broker) handleLockBatch(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body remoting.LockBatchBody[Queue]
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return response(req, remoting.SystemError, "lock batch: bad body: %v", err)
	}
	if body.ConsumerGroup == "" || body.ClientID == "" {
		return response(req, remoting.SystemError, "lock batch: consumerGroup and clientId are required")
	}
	if err := checkGroup(body.ConsumerGroup); err != nil {
		return response(req, remoting.SubscriptionGroupNotExist, "lock batch: %v", err)
	}
	locked := b.locks.lock(body.ConsumerGroup, body.ClientID, c, body.MQSet, b.now())
	out, err := json.Marshal(remoting.LockBatchResult[Queue]{LockOKMQSet: locked})
	if err != nil {
		return response(req, remoting.SystemError, "lock batch: %v", err)
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = out
	return resp
}

func (b *Broker) handleUnlockBatch(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	var body remoting.LockBatchBody[Queue]
	if err := json.Unmarshal(req.Body, &body); err != nil {
		return response(req, remoting.SystemError, "unlock batch: bad body: %v", err)
	}
	b.locks.unlock(body.ConsumerGroup, body.ClientID, body.MQSet)
	return remoting.NewResponse(req, remoting.Success, "")
}

// lockedPull answers a pull of a queue that another client of a
// clustering group holds locked, or returns nil. The answer is SYSTEM_BUSY: the official
// clients treat any code outside 0/19/20/21 as a failed pull and retry
// the same offset after 3 s, which is the back-off wanted here. 19 and 20
// would be re-pulled at once (a hot loop), and 21 drops the queue and
// rewrites its committed offset.
func (b *Broker) lockedPull(p *pullRequest) *remoting.Command {
	holder, ok := b.locks.holderElsewhere(p.group, p.topic, p.queueID, p.conn, b.now())
	if !ok || b.broadcasting(p.group) {
		return nil
	}
	if c, ok := b.clients.clientConn(holder); ok && c == p.conn {
		// The holder's own pull on its heartbeat's connection: a Java
		// client with its VIP channel on locks over that channel (the
		// broker port - 2) and pulls over the plain one.
		return nil
	}
	return response(p.req, remoting.SystemBusy, "pull: queue %s/%d of group %s is locked by client %s", p.topic, p.queueID, p.group, holder)
}

// broadcasting reports whether a consumer group consumes in broadcasting
// mode, where every member reads every queue whatever the locks say.
func (b *Broker) broadcasting(group string) bool { return b.clients.broadcasting(group) }
