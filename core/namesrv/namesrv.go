package namesrv

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
)

// Defaults for Options fields left zero.
const (
	DefaultBrokerExpiry = 120 * time.Second
)

// Options configures a Server. Zero values mean the documented default.
// The yaml tags name each field in the broker's config file (section
// embeddedNamesrv).
type Options struct {
	// BrokerExpiry drops a broker that has not registered for this long.
	// Default 120 s.
	BrokerExpiry time.Duration `yaml:"brokerExpiry"`
	// RetryRoutes answers a route lookup for a retry topic with one queue
	// on every live master that has not registered it (yet), beside those
	// that have. A push consumer looks up its group's retry topic at
	// start, around its first heartbeat, which creates it on each master,
	// and otherwise only at its next route update, 30 s on; answering at
	// once lets retries flow from every master from the first second.
	// Default true; set DisableRetryRoutes to turn it off.
	DisableRetryRoutes bool `yaml:"disableRetryRoutes"`
	// Logger receives the server's logs. Default slog.Default().
	Logger *slog.Logger `yaml:"-"`
	// Now is the clock. Default time.Now.
	Now func() time.Time `yaml:"-"`
	// Remoting configures the port: connection limits, TLS and the
	// Authorize hook (remoting.ServerOptions). Its Logger defaults to
	// Logger. The broker process sets an Authorize built over core/acl,
	// under which REGISTER_BROKER, UNREGISTER_BROKER and
	// DELETE_TOPIC_IN_NAMESRV need an admin account.
	Remoting remoting.ServerOptions `yaml:"-"`
}

// Server is a name server.
type Server struct {
	opts Options
	log  *slog.Logger
	rs   *remoting.Server

	mu      sync.RWMutex
	brokers map[string]*brokerEntry // by broker address

	quit     chan struct{}
	wg       sync.WaitGroup
	expiring sync.Once // the first Serve starts expireLoop
	shutdown sync.Once
}

type brokerEntry struct {
	cluster    string
	name       string
	addr       string
	grpc       string // advertised gRPC endpoint, if it registered one
	id         int64
	topics     map[string]remoting.TopicConfig
	version    remoting.DataVersion
	lastUpdate time.Time
}

// New returns a name server; Serve starts it.
func New(opts Options) *Server {
	if opts.BrokerExpiry == 0 {
		opts.BrokerExpiry = DefaultBrokerExpiry
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{
		opts:    opts,
		log:     opts.Logger.With("component", "namesrv"),
		brokers: make(map[string]*brokerEntry),
		quit:    make(chan struct{}),
	}
	ro := opts.Remoting
	if ro.Logger == nil {
		ro.Logger = opts.Logger
	}
	s.rs = remoting.NewServer(ro)
	s.rs.Handle(remoting.RegisterBroker, s.handleRegister)
	s.rs.Handle(remoting.UnregisterBroker, s.handleUnregister)
	s.rs.Handle(remoting.GetRouteInfoByTopic, s.handleRoute)
	s.rs.Handle(remoting.GetBrokerClusterInfo, s.handleClusterInfo)
	s.rs.Handle(remoting.GetAllTopicListFromNameserver, s.handleTopicList)
	s.rs.Handle(remoting.DeleteTopicInNamesrv, s.handleDeleteTopic)
	return s
}

// Serve accepts connections on ln until Shutdown. It may serve more than
// one listener at once, each in a call of its own.
func (s *Server) Serve(ln net.Listener) error {
	s.expiring.Do(func() {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.expireLoop()
		}()
	})
	err := s.rs.Serve(ln)
	if errors.Is(err, remoting.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops the server; it is safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdown.Do(func() { close(s.quit) })
	err := s.rs.Shutdown(ctx)
	s.wg.Wait()
	return err
}

func (s *Server) expireLoop() {
	t := time.NewTicker(min(10*time.Second, s.opts.BrokerExpiry/4))
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			s.expire()
		}
	}
}

// expire drops brokers that stopped registering.
func (s *Server) expire() {
	now := s.opts.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for addr, b := range s.brokers {
		if now.Sub(b.lastUpdate) > s.opts.BrokerExpiry {
			s.log.Warn("broker expired", "broker", b.name, "addr", addr, "last_registered", b.lastUpdate)
			delete(s.brokers, addr)
		}
	}
}

// addTo adds the broker's address to its set's g, and its gRPC endpoint
// too when grpc is set and it registered one.
func (b *brokerEntry) addTo(g *remoting.BrokerData, grpc bool) {
	g.BrokerAddrs[b.id] = b.addr
	if grpc && b.grpc != "" {
		if g.GRPCAddrs == nil {
			g.GRPCAddrs = map[int64]string{}
		}
		g.GRPCAddrs[b.id] = b.grpc
	}
}

func errResponse(req *remoting.Command, code int16, remark string) *remoting.Command {
	return remoting.NewResponse(req, code, remark)
}

func (s *Server) handleRegister(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	name, addr := req.Get("brokerName"), req.Get("brokerAddr")
	id, err := req.Int64Or("brokerId", 0)
	if name == "" || addr == "" || err != nil {
		return errResponse(req, remoting.SystemError, "register broker: brokerName, brokerAddr and a numeric brokerId are required")
	}
	var body remoting.RegisterBrokerBody
	if len(req.Body) > 0 {
		if req.Get("compressed") == "true" {
			return errResponse(req, remoting.SystemError, "register broker: compressed bodies are not supported; send compressed=false")
		}
		if err := json.Unmarshal(req.Body, &body); err != nil {
			return errResponse(req, remoting.SystemError, "register broker: bad body: "+err.Error())
		}
	}
	e := &brokerEntry{
		cluster:    req.Get("clusterName"),
		name:       name,
		addr:       addr,
		grpc:       req.Get(remoting.RegisterGRPCAddrField),
		id:         id,
		topics:     body.TopicConfigSerializeWrapper.TopicConfigTable,
		version:    body.TopicConfigSerializeWrapper.DataVersion,
		lastUpdate: s.opts.Now(),
	}
	if e.cluster == "" {
		e.cluster = "DefaultCluster"
	}
	if e.topics == nil {
		e.topics = map[string]remoting.TopicConfig{}
	}
	incremental := req.Get("incremental") == "true"
	s.mu.Lock()
	old := s.brokers[addr]
	if old == nil {
		s.log.Info("broker registered", "broker", name, "addr", addr, "cluster", e.cluster, "topics", len(e.topics), "incremental", incremental)
	}
	if incremental && old != nil {
		// The broker sent only the topics that changed: the rest of
		// what it registered before stands.
		for topic, tc := range e.topics {
			old.topics[topic] = tc
		}
		e.topics = old.topics
	}
	s.brokers[addr] = e
	// One address per broker name and id: a replicated set's new master
	// registers from another address than the one it replaces, which may
	// be gone without unregistering.
	for a, b := range s.brokers {
		if a != addr && b.cluster == e.cluster && b.name == e.name && b.id == e.id {
			delete(s.brokers, a)
			s.log.Info("broker replaced at a new address", "broker", name, "id", id, "old", a, "new", addr)
		}
	}
	s.mu.Unlock()
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Set("haServerAddr", "")
	resp.Set("masterAddr", addr)
	return resp
}

func (s *Server) handleUnregister(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	addr := req.Get("brokerAddr")
	s.mu.Lock()
	if _, ok := s.brokers[addr]; ok {
		delete(s.brokers, addr)
		s.log.Info("broker unregistered", "addr", addr)
	}
	s.mu.Unlock()
	return remoting.NewResponse(req, remoting.Success, "")
}

// Route builds the route of topic from the live brokers' tables. ok is
// false when no broker serves it.
func (s *Server) Route(topic string) (remoting.TopicRouteData, bool) {
	r := remoting.TopicRouteData{QueueDatas: []remoting.QueueData{}, BrokerDatas: []remoting.BrokerData{}, FilterServerTable: map[string][]string{}}
	s.mu.RLock()
	defer s.mu.RUnlock()
	groups := map[string]*remoting.BrokerData{}
	live := s.opts.Now().Add(-s.opts.BrokerExpiry)
	addGroup := func(b *brokerEntry) {
		g := groups[b.name]
		if g == nil {
			g = &remoting.BrokerData{Cluster: b.cluster, BrokerName: b.name, BrokerAddrs: map[int64]string{}}
			groups[b.name] = g
		}
		b.addTo(g, true)
	}
	seenQueue := map[string]bool{}
	replicas := map[string]*brokerEntry{} // a set's lowest live replica with the topic
	for _, b := range s.brokers {
		if b.lastUpdate.Before(live) {
			continue
		}
		tc, ok := b.topics[topic]
		if !ok {
			continue
		}
		addGroup(b)
		if b.id == 0 && !seenQueue[b.name] {
			seenQueue[b.name] = true
			r.QueueDatas = append(r.QueueDatas, remoting.QueueData{
				BrokerName: b.name, ReadQueueNums: tc.ReadQueueNums, WriteQueueNums: tc.WriteQueueNums,
				Perm: tc.Perm, TopicSysFlag: tc.TopicSysFlag,
			})
		}
		if b.id != 0 && (replicas[b.name] == nil || b.id < replicas[b.name].id) {
			replicas[b.name] = b
		}
	}
	// A set without a live master (a replicated set that lost its
	// majority) still serves reads from its replicas: its queues are
	// routed from a replica's table, readable only, so producers pass
	// it by and consumers pull from the replica.
	for name, b := range replicas {
		if seenQueue[name] {
			continue
		}
		seenQueue[name] = true
		tc := b.topics[topic]
		r.QueueDatas = append(r.QueueDatas, remoting.QueueData{
			BrokerName: name, ReadQueueNums: tc.ReadQueueNums, WriteQueueNums: tc.WriteQueueNums,
			Perm: tc.Perm &^ remoting.PermWrite, TopicSysFlag: tc.TopicSysFlag,
		})
	}
	if strings.HasPrefix(topic, remoting.RetryGroupTopicPrefix) && !s.opts.DisableRetryRoutes {
		// Every live master, also while the masters register the topic
		// one after another after a consumer's first heartbeat.
		for _, b := range s.brokers {
			if b.id != 0 || b.lastUpdate.Before(live) || seenQueue[b.name] {
				continue
			}
			seenQueue[b.name] = true
			addGroup(b)
			r.QueueDatas = append(r.QueueDatas, remoting.QueueData{BrokerName: b.name, ReadQueueNums: 1, WriteQueueNums: 1, Perm: remoting.PermRead | remoting.PermWrite})
		}
	}
	if len(r.QueueDatas) == 0 {
		return r, false
	}
	for _, g := range groups {
		r.BrokerDatas = append(r.BrokerDatas, *g)
	}
	slices.SortFunc(r.QueueDatas, func(a, b remoting.QueueData) int { return strings.Compare(a.BrokerName, b.BrokerName) })
	slices.SortFunc(r.BrokerDatas, func(a, b remoting.BrokerData) int { return strings.Compare(a.BrokerName, b.BrokerName) })
	return r, true
}

func (s *Server) handleRoute(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic := req.Get("topic")
	r, ok := s.Route(topic)
	if !ok {
		return errResponse(req, remoting.TopicNotExist, "No topic route info in name server for the topic: "+topic)
	}
	if req.Get(remoting.RouteGRPCAddrsField) != "true" {
		// RocketMQ's clients get the body they know.
		for i := range r.BrokerDatas {
			r.BrokerDatas[i].GRPCAddrs = nil
		}
	}
	body, err := json.Marshal(r)
	if err != nil {
		return errResponse(req, remoting.SystemError, err.Error())
	}
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

func (s *Server) handleClusterInfo(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	info := remoting.ClusterInfo{BrokerAddrTable: map[string]remoting.BrokerData{}, ClusterAddrTable: map[string][]string{}}
	s.mu.RLock()
	for _, b := range s.brokers {
		g, ok := info.BrokerAddrTable[b.name]
		if !ok {
			g = remoting.BrokerData{Cluster: b.cluster, BrokerName: b.name, BrokerAddrs: map[int64]string{}}
			if !slices.Contains(info.ClusterAddrTable[b.cluster], b.name) {
				info.ClusterAddrTable[b.cluster] = append(info.ClusterAddrTable[b.cluster], b.name)
			}
		}
		b.addTo(&g, req.Get(remoting.RouteGRPCAddrsField) == "true")
		info.BrokerAddrTable[b.name] = g
	}
	s.mu.RUnlock()
	body, _ := json.Marshal(info)
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

// Topics lists every topic some live broker registered.
func (s *Server) Topics() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	set := map[string]bool{}
	for _, b := range s.brokers {
		for t := range b.topics {
			set[t] = true
		}
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

func (s *Server) handleTopicList(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	body, _ := json.Marshal(remoting.TopicList{TopicList: s.Topics()})
	resp := remoting.NewResponse(req, remoting.Success, "")
	resp.Body = body
	return resp
}

func (s *Server) handleDeleteTopic(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	topic := req.Get("topic")
	s.mu.Lock()
	for _, b := range s.brokers {
		delete(b.topics, topic)
	}
	s.mu.Unlock()
	return remoting.NewResponse(req, remoting.Success, "")
}
