package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// instance is the part of a client shared by every producer and consumer
// with the same client id: one remoting client (so one connection per
// broker and name server), the route table, heartbeats, and the dispatch
// of requests that brokers send to the client.
type instance struct {
	id   string
	opts ClientOptions
	log  *slog.Logger
	rc   *remoting.Client

	quit chan struct{}
	wg   sync.WaitGroup

	// hbMu serializes heartbeats, so a heartbeat sent at start and one
	// from the loop never race each other's content.
	hbMu sync.Mutex

	mu struct {
		sync.Mutex
		refs      int
		nsIndex   int
		routes    map[string]*topicRoute
		brokers   map[string]map[int64]string // broker name → id → address
		producers map[string]producerMember
		consumers map[string]consumerMember
	}
}

// producerMember is what the instance needs of a producer group.
type producerMember interface {
	// topics are the topics whose routes the producer keeps fresh.
	topics() []string
	// checkTransaction answers a broker's CHECK_TRANSACTION_STATE for a
	// half message of this group. It must not block the caller.
	checkTransaction(brokerAddr string, msg *MessageExt, tranStateTableOffset, commitLogOffset int64, transactionID string)
}

// consumerMember is what the instance needs of a consumer group.
type consumerMember interface {
	// heartbeat is the group's part of a heartbeat.
	heartbeat() remoting.ConsumerData
	// topics are the subscribed topics, retry topic included.
	topics() []string
	// rebalanceSoon asks the consumer to rebalance now; it must not block.
	rebalanceSoon()
}

// registry holds the live instances by client id.
var registry struct {
	sync.Mutex
	m map[string]*instance
}

// acquireInstance returns the instance of opts' client id, starting it if
// there is none, and counts a reference to it. Every acquire is paired
// with a release.
func acquireInstance(opts ClientOptions) (*instance, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	id := opts.clientID()
	registry.Lock()
	defer registry.Unlock()
	if registry.m == nil {
		registry.m = make(map[string]*instance)
	}
	if in := registry.m[id]; in != nil {
		if !slices.Equal(sortedCopy(in.opts.NameServers), sortedCopy(opts.NameServers)) {
			return nil, fmt.Errorf("client: client id %s is already in use with name servers %v; give this one another InstanceName", id, in.opts.NameServers)
		}
		in.mu.Lock()
		in.mu.refs++
		in.mu.Unlock()
		return in, nil
	}
	in := &instance{id: id, opts: opts, log: opts.Logger.With("client", id), quit: make(chan struct{})}
	in.rc = remoting.NewClient(remoting.ClientOptions{
		DialTimeout: opts.RequestTimeout,
		Logger:      in.log,
		OnRequest:   in.serveRequest,
		TLS:         opts.TLS,
	})
	in.mu.refs = 1
	in.mu.routes = make(map[string]*topicRoute)
	in.mu.brokers = make(map[string]map[int64]string)
	in.mu.producers = make(map[string]producerMember)
	in.mu.consumers = make(map[string]consumerMember)
	in.mu.nsIndex = rand.IntN(len(opts.NameServers))
	registry.m[id] = in
	in.goLoop(opts.PollNameServerInterval, in.refreshRoutes)
	in.goLoop(opts.HeartbeatInterval, func() { _ = in.heartbeat() })
	return in, nil
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// release drops a reference; the last one stops the instance and closes
// its connections.
func (in *instance) release() {
	registry.Lock()
	in.mu.Lock()
	in.mu.refs--
	last := in.mu.refs == 0
	in.mu.Unlock()
	if last && registry.m[in.id] == in {
		delete(registry.m, in.id)
	}
	registry.Unlock()
	if !last {
		return
	}
	close(in.quit)
	in.wg.Wait()
	_ = in.rc.Close()
}

// goLoop runs fn every interval until the instance stops.
func (in *instance) goLoop(interval time.Duration, fn func()) {
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-in.quit:
				return
			case <-t.C:
				fn()
			}
		}
	}()
}

// ctx returns a context bounded by the request timeout.
func (in *instance) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), in.opts.RequestTimeout)
}

// invoke sends req to addr, bounding it by the request timeout when ctx
// has no deadline.
func (in *instance) invoke(ctx context.Context, addr string, req *remoting.Command) (*remoting.Command, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, in.opts.RequestTimeout)
		defer cancel()
	}
	return in.rc.Invoke(ctx, addr, req)
}

// registerProducer adds a producer group; a group may be registered once
// per instance.
func (in *instance) registerProducer(group string, p producerMember) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, dup := in.mu.producers[group]; dup {
		return fmt.Errorf("%w: producer group %s in client %s", ErrGroupInUse, group, in.id)
	}
	in.mu.producers[group] = p
	return nil
}

// registerConsumer adds a consumer group; a group may be registered once
// per instance.
func (in *instance) registerConsumer(group string, c consumerMember) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, dup := in.mu.consumers[group]; dup {
		return fmt.Errorf("%w: consumer group %s in client %s", ErrGroupInUse, group, in.id)
	}
	in.mu.consumers[group] = c
	return nil
}

// unregister removes a producer or consumer group (either may be empty)
// and tells every broker, so the broker forgets this client's membership
// at once instead of when the connection closes.
func (in *instance) unregister(producerGroup, consumerGroup string) error {
	in.mu.Lock()
	if producerGroup != "" {
		delete(in.mu.producers, producerGroup)
	}
	if consumerGroup != "" {
		delete(in.mu.consumers, consumerGroup)
	}
	addrs := in.allBrokerAddrsLocked(false)
	in.mu.Unlock()
	ext := map[string]string{"clientID": in.id}
	if producerGroup != "" {
		ext["producerGroup"] = producerGroup
	}
	if consumerGroup != "" {
		ext["consumerGroup"] = consumerGroup
	}
	var errs []error
	for _, addr := range addrs {
		resp, err := in.invoke(context.Background(), addr, remoting.NewRequest(remoting.UnregisterClient, cloneMap(ext), nil))
		if err == nil && resp.Code != remoting.Success {
			err = brokerError(resp)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("unregister at %s: %w", addr, err))
		}
	}
	return errors.Join(errs...)
}

func cloneMap(m map[string]string) map[string]string {
	c := make(map[string]string, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// serveRequest handles the requests brokers send to clients.
func (in *instance) serveRequest(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	switch req.Code {
	case remoting.NotifyConsumerIdsChanged:
		group := req.Get("consumerGroup")
		in.mu.Lock()
		cm := in.mu.consumers[group]
		in.mu.Unlock()
		if cm != nil {
			in.log.Debug("consumer ids changed", "group", group)
			cm.rebalanceSoon()
		}
		return nil
	case remoting.CheckTransactionState:
		in.serveCheck(c, req)
		return nil
	}
	if resp, ok := in.serveRelay(c, req); ok {
		return resp
	}
	if req.IsOneway() {
		return nil
	}
	return remoting.NewResponse(req, remoting.RequestCodeNotSupported, fmt.Sprintf("request code %d is not supported by this client", req.Code))
}

// serveCheck hands a CHECK_TRANSACTION_STATE to the producer of the half
// message's group.
func (in *instance) serveCheck(c *remoting.Conn, req *remoting.Command) {
	recs, err := message.DecodeRecords(req.Body)
	if err != nil || len(recs) != 1 {
		in.log.Warn("transaction check with an unreadable message", "broker", c.RemoteAddr(), "err", err)
		return
	}
	msg, err := fromRecord(recs[0], "")
	if err != nil {
		in.log.Warn("transaction check with an unreadable body", "broker", c.RemoteAddr(), "err", err)
	}
	if id := msg.Property(message.PropertyUniqKey); id != "" {
		msg.MsgID = id
	}
	group := msg.Property(message.PropertyProducerGroup)
	in.mu.Lock()
	pm := in.mu.producers[group]
	in.mu.Unlock()
	if pm == nil {
		in.log.Warn("transaction check for a producer group this client does not have", "group", group)
		return
	}
	tranOff, _ := req.Int64Or("tranStateTableOffset", 0)
	clOff, _ := req.Int64Or("commitLogOffset", 0)
	pm.checkTransaction(c.RemoteAddr().String(), msg, tranOff, clOff, req.Get("transactionId"))
}

// heartbeat sends the instance's producers and consumers to every known
// broker: masters only when there are no consumers. It returns the errors
// joined.
func (in *instance) heartbeat() error {
	in.hbMu.Lock()
	defer in.hbMu.Unlock()
	in.mu.Lock()
	hb := remoting.HeartbeatData{ClientID: in.id, ProducerDataSet: []remoting.ProducerData{}, ConsumerDataSet: []remoting.ConsumerData{}}
	for g := range in.mu.producers {
		hb.ProducerDataSet = append(hb.ProducerDataSet, remoting.ProducerData{GroupName: g})
	}
	consumers := make([]consumerMember, 0, len(in.mu.consumers))
	for _, c := range in.mu.consumers {
		consumers = append(consumers, c)
	}
	addrs := in.allBrokerAddrsLocked(len(consumers) == 0)
	in.mu.Unlock()
	if len(hb.ProducerDataSet) == 0 && len(consumers) == 0 {
		return nil
	}
	for _, c := range consumers {
		hb.ConsumerDataSet = append(hb.ConsumerDataSet, c.heartbeat())
	}
	body, err := json.Marshal(hb)
	if err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, addr := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := in.invoke(context.Background(), addr, remoting.NewRequest(remoting.HeartBeat, map[string]string{}, body))
			if err == nil && resp.Code != remoting.Success {
				err = brokerError(resp)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("heartbeat to %s: %w", addr, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	err = errors.Join(errs...)
	if err != nil {
		in.log.Warn("heartbeat failed", "err", err)
	}
	return err
}

// allBrokerAddrsLocked lists known broker addresses, sorted.
func (in *instance) allBrokerAddrsLocked(mastersOnly bool) []string {
	var out []string
	for _, ids := range in.mu.brokers {
		for id, addr := range ids {
			if mastersOnly && id != 0 {
				continue
			}
			out = append(out, addr)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// topicsOfInterest lists the topics of every member.
func (in *instance) topicsOfInterest() []string {
	in.mu.Lock()
	var ps []producerMember
	var cs []consumerMember
	for _, p := range in.mu.producers {
		ps = append(ps, p)
	}
	for _, c := range in.mu.consumers {
		cs = append(cs, c)
	}
	in.mu.Unlock()
	var topics []string
	for _, p := range ps {
		topics = append(topics, p.topics()...)
	}
	for _, c := range cs {
		topics = append(topics, c.topics()...)
	}
	slices.Sort(topics)
	return slices.Compact(topics)
}

// refreshRoutes fetches the route of every topic of interest.
func (in *instance) refreshRoutes() {
	for _, t := range in.topicsOfInterest() {
		if _, err := in.updateRoute(context.Background(), t); err != nil && !errors.Is(err, ErrTopicNotExist) {
			in.log.Warn("route refresh failed", "topic", t, "err", err)
		}
	}
}
