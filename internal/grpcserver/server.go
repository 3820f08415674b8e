package grpcserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// Defaults of Options fields left zero.
const (
	DefaultMaxSessions      = 10000
	DefaultMaxConns         = 1024
	DefaultHandshakeTimeout = 60 * time.Second
	DefaultMaxStreams       = 128
	DefaultMaxWaiting       = 8192
	DefaultLiteQuota        = 1000
	DefaultSessionExpiry    = 120 * time.Second
	DefaultLongPolling      = 20 * time.Second
	DefaultInvisible        = broker.DefaultPOPInvisible
	DefaultReceiveBatch     = 32
	MaxReceiveBatch         = 1024
	DefaultMaxDeliveries    = broker.DefaultMaxReconsumeTimes + 1
	defaultProducerBackoff  = 3 // attempts of a producer's send
)

// Options configure a Server. Zero values mean the stated default.
type Options struct {
	// Broker serves the sends, transactions, filters and POP consumption
	// (its POP engine). Required.
	Broker *broker.Broker `yaml:"-"`
	// BrokerName names the broker in routes. Default broker-a.
	BrokerName string `yaml:"-"`
	// Advertise is the gRPC address routes name (host:port). Default the
	// listener's address.
	Advertise string `yaml:"advertise"`
	// MaxBodySize is the largest body a producer may send, told to
	// producers in their settings. Default the broker's default.
	MaxBodySize int `yaml:"-"`
	// TLS, when set, serves TLS instead of h2c.
	TLS *tls.Config `yaml:"-"`
	// TLSPermissive, with TLS set, serves plain h2c on the same port too:
	// a connection whose first byte starts a TLS handshake gets TLS, any
	// other is plain.
	TLSPermissive bool `yaml:"-"`
	// HandshakeTimeout bounds a new connection's setup: its first byte,
	// the TLS handshake and HTTP/2's. Default 60 s (the broker process
	// passes remoting's frameReadTimeout).
	HandshakeTimeout time.Duration `yaml:"-"`
	// ACL returns the access control in force (it may be reloaded); nil
	// or a disabled Checker allows everything.
	ACL func() *acl.Checker `yaml:"-"`
	// MaxSessions bounds the client sessions (clients that sent Settings).
	// Default 10000.
	MaxSessions int `yaml:"maxSessions"`
	// MaxConns bounds the open connections; more wait in the kernel's
	// accept backlog until one closes. Default 1024.
	MaxConns int `yaml:"maxConns"`
	// MaxStreams bounds the concurrent gRPC streams of each connection.
	// Default 128.
	MaxStreams int `yaml:"maxStreams"`
	// LiteSubscriptionQuota bounds the lite topics one lite consumer
	// subscribes to, told to it in its settings. Default 1000.
	LiteSubscriptionQuota int `yaml:"liteSubscriptionQuota"`
	// MaxWaiting bounds the receives waiting for messages at once; more
	// are answered TOO_MANY_REQUESTS. Default 1024.
	MaxWaiting int `yaml:"maxWaiting"`
	// SessionExpiry drops a session without a heartbeat, Settings or open
	// Telemetry stream for this long. Default 120s.
	SessionExpiry time.Duration `yaml:"sessionExpiry"`
	// LongPolling bounds how long a receive waits for messages, and is
	// told to consumers. Default 20s.
	LongPolling time.Duration `yaml:"longPolling"`
	// Leader, when set, makes this the endpoint of a replicated set's
	// replica (replica.go): it answers QueryRoute and QueryAssignment with
	// queues on the leader's endpoint and refuses every other call with
	// HA_NOT_AVAILABLE. It returns the leader's advertised gRPC address
	// ("" while unknown) and words naming the leader for the refusals.
	// Broker is then the replica's, and Store is only read.
	Leader func() (addr, who string) `yaml:"-"`
	// Logger receives the endpoint's logs. Default slog.Default().
	Logger *slog.Logger `yaml:"-"`
	// Now is the clock; default time.Now.
	Now func() time.Time `yaml:"-"`
	// Counts, if set, counts the responses (a process keeps one for
	// its metrics across the Servers it runs); default counts of the
	// Server's own.
	Counts *Counts `yaml:"-"`
}

func (o *Options) fill() error {
	var errs []error
	if o.Broker == nil {
		errs = append(errs, errors.New("grpcserver: Options.Broker is required"))
	}
	if o.BrokerName == "" {
		o.BrokerName = broker.DefaultBrokerName
	}
	if o.MaxBodySize <= 0 {
		o.MaxBodySize = broker.DefaultMaxMessageSize
	}
	if o.ACL == nil {
		o.ACL = func() *acl.Checker { return nil }
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.LiteSubscriptionQuota <= 0 {
		o.LiteSubscriptionQuota = DefaultLiteQuota
	}
	if o.MaxConns <= 0 {
		o.MaxConns = DefaultMaxConns
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.MaxWaiting <= 0 {
		o.MaxWaiting = DefaultMaxWaiting
	}
	if o.SessionExpiry <= 0 {
		o.SessionExpiry = DefaultSessionExpiry
	}
	if o.LongPolling <= 0 {
		o.LongPolling = DefaultLongPolling
	}
	if o.LongPolling > DefaultLongPolling {
		errs = append(errs, fmt.Errorf("grpcserver: longPolling %v is above %v, which clients accept", o.LongPolling, DefaultLongPolling))
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Counts == nil {
		o.Counts = NewCounts()
	}
	return errors.Join(errs...)
}

// Server serves apache.rocketmq.v2.MessagingService for one broker.
type Server struct {
	pb.UnimplementedMessagingServiceServer

	opts     Options
	log      *slog.Logger
	b        *broker.Broker
	grpc     *grpc.Server
	sessions *sessionTable
	lite     *liteSubs // lite consumers' subscriptions (lite.go)

	forwardTo forwardConns // for forwarded calls (forward.go)
	peers     *peerCache   // the other broker sets' queues (peers.go)

	addr    string // advertised, set by Serve
	started chan struct{}
	quit    chan struct{}
	wg      sync.WaitGroup
	stop    sync.Once
}

// New checks opts and returns a Server; it opens the broker's POP engine
// (which loads its secret from the store) unless it serves a replica.
func New(opts Options) (*Server, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger, b: opts.Broker, started: make(chan struct{}), quit: make(chan struct{})}
	s.sessions = newSessionTable(opts.MaxSessions, opts.SessionExpiry)
	s.lite = newLiteSubs(opts.MaxSessions, opts.LiteSubscriptionQuota)
	s.peers = newPeerCache(opts.Broker, opts.BrokerName, opts.Now, opts.Logger)
	if opts.Leader == nil { // a replica keeps no POP state (replica.go)
		err := opts.Broker.POP().Open(broker.POPOptions{Alive: s.sessions.alive, MaxWaiting: opts.MaxWaiting, Now: opts.Now})
		if err != nil {
			return nil, err
		}
		opts.Broker.Hooks().OnTransactionCheck(s.checkTransaction)
		opts.Broker.Hooks().OnLiteExpired(s.liteExpired)
		opts.Broker.Hooks().OnPull(func(group string) error {
			if s.sessions.hasConsumers(group) {
				return fmt.Errorf("group %s is consumed by POP over gRPC: a group consumes either by POP or by pull at a time", group)
			}
			return nil
		})
	}
	refused := newRefusals(opts.Logger, opts.Counts)
	so := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(refused.unary, s.replicaUnary),
		grpc.ChainStreamInterceptor(refused.stream, s.replicaStream),
		// Shutdown returns only once every handler has: the broker and
		// store it serves may stop right after (a set's role change).
		grpc.WaitForHandlers(true),
		grpc.MaxConcurrentStreams(uint32(opts.MaxStreams)),
		grpc.MaxRecvMsgSize(opts.MaxBodySize + 1<<20),
		// Fixed flow-control windows: see streamWindow.
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.ConnectionTimeout(opts.HandshakeTimeout),
	}
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	switch {
	case opts.TLS != nil && opts.TLSPermissive:
		creds = newPermissiveCreds(opts.TLS)
	case opts.TLS != nil:
		creds = credentials.NewTLS(opts.TLS)
	}
	so = append(so, grpc.Creds(ackHoldCreds{creds, ackHold}))
	s.grpc = grpc.NewServer(so...)
	pb.RegisterMessagingServiceServer(s.grpc, s)
	return s, nil
}

// Serve serves on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.addr = s.opts.Advertise
	if s.addr == "" {
		s.addr = ln.Addr().String()
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.sweepSessions()
	}()
	close(s.started)
	err := s.grpc.Serve(netutil.LimitListener(ln, s.opts.MaxConns))
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Addr returns the advertised address once Serve has started.
func (s *Server) Addr() string {
	<-s.started
	return s.addr
}

// Shutdown stops accepting, wakes the waiting receives and Telemetry
// streams, and waits for the calls in progress until ctx ends; then it
// closes what is left. It is safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stop.Do(func() { close(s.quit) })
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
	}
	s.wg.Wait()
	s.forwardTo.close()
	return nil
}

// sweepSessions drops expired sessions until the server stops.
func (s *Server) sweepSessions() {
	t := time.NewTicker(max(s.opts.SessionExpiry/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
			for _, id := range s.sessions.sweep(s.opts.Now()) {
				s.dropLite(id)
				s.log.Debug("grpc session expired", "client_id", id)
			}
			s.lite.sweep(s.opts.Now(), s.opts.SessionExpiry, s.sessions.alive)
		}
	}
}

// call is what a request's metadata says about its sender.
type call struct {
	clientID  string
	requestID string
	remote    netip.AddrPort
}

// Metadata keys read from requests.
const (
	mdClientID      = "x-mq-client-id"
	mdRequestID     = "x-mq-request-id"
	mdDateTime      = "x-mq-date-time"
	mdAuthorization = "authorization"
)

// begin reads a request's metadata and checks its sender: a client id is
// required, and with ACL on, a signature of an account holding res.
func (s *Server) begin(ctx context.Context, res ...acl.Resource) (call, error) {
	var c call
	// One value at a time: FromIncomingContext would copy every header
	// of the call, at each call.
	first := func(k string) string {
		if v := metadata.ValueFromIncomingContext(ctx, k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	if p, ok := peer.FromContext(ctx); ok {
		if ta, ok := p.Addr.(*net.TCPAddr); ok {
			ap := ta.AddrPort()
			c.remote = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		}
	}
	c.clientID, c.requestID = first(mdClientID), first(mdRequestID)
	if c.clientID == "" {
		return c, ErrClientIDRequired
	}
	if chk := s.opts.ACL(); chk.Enabled() {
		ak, sig := parseAuthorization(first(mdAuthorization))
		if err := chk.CheckSigned(c.remote.Addr(), ak, first(mdDateTime), sig, res...); err != nil {
			return c, err
		}
	}
	return c, nil
}

// parseAuthorization reads "MQv2-HMAC-SHA1 Credential=AK, SignedHeaders=
// x-mq-date-time, Signature=HEX"; Credential may carry more "/"-separated
// parts after the access key, as the Java client writes it.
func parseAuthorization(v string) (accessKey, signature string) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(v), "MQv2-HMAC-SHA1")
	if !ok {
		return "", ""
	}
	for part := range strings.SplitSeq(rest, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			accessKey, _, _ = strings.Cut(val, "/")
		case "Signature":
			signature = val
		}
	}
	return accessKey, signature
}

// resource names a Resource: a namespaced one is <namespace>%<name>, as
// Apache's proxy wrapped it up to 5.1 and as a 4.x client of that
// namespace names it, so namespaces share the broker's topics and groups
// without meeting. (The proxy of 5.2 and later ignores the namespace.)
func resource(r *pb.Resource) string {
	if ns := r.GetResourceNamespace(); ns != "" {
		return ns + "%" + r.GetName()
	}
	return r.GetName()
}

// unwrap is resource's inverse for a name the broker made (a check-back's
// topic): a name with a '%' that is not a retry or dead-letter topic's is
// namespaced.
func unwrap(name string) *pb.Resource {
	if !strings.HasPrefix(name, "%") {
		if ns, n, ok := strings.Cut(name, "%"); ok {
			return &pb.Resource{ResourceNamespace: ns, Name: n}
		}
	}
	return &pb.Resource{Name: name}
}

// HTTP/2 flow-control windows of the gRPC port. Setting them turns off
// grpc-go's bandwidth-delay estimation, which pings the client whenever
// data arrives on a connection with no ping out: with one call in flight
// per connection, as a client sending synchronously has, that was a ping
// and its answer to handle on every call. What they allow unread is also
// all a connection can make the broker hold beyond the message it reads.
const (
	streamWindow = 256 << 10
	connWindow   = 1 << 20
)
