// Package server assembles a runnable broker from its parts: the store,
// the embedded name server, the broker, the filters and the WASM plugins
// (plugins.go). cmd/broker maps flags and the config file onto Config;
// tests use it to run the whole thing in-process.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/cluster"
	"github.com/rmq-go/rmq/core/namesrv"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/filters/sql92"
	"github.com/rmq-go/rmq/filters/tag"
	"github.com/rmq-go/rmq/internal/grpcserver"
)

// Defaults of Config fields left zero, and of the broker command.
const (
	DefaultListen = "127.0.0.1:10911"
	// DefaultVIPListen is the broker command's VIP channel: the broker
	// port - 2, as RocketMQ's brokers listen.
	DefaultVIPListen     = "auto"
	DefaultDataDir       = "./data"
	DefaultNamesrvListen = "127.0.0.1:9876" // the broker command's; Config's default is none
)

// Config is everything a broker process runs with. Zero values mean the
// documented default. The yaml tags name each field in the config file
// (config.go reads it); the components' Options carry their own.
type Config struct {
	// DataDir holds the store. Default "./data".
	DataDir string `yaml:"dataDir"`
	// Listen is the broker's address; "127.0.0.1:0" picks a free port.
	// Default "127.0.0.1:10911".
	Listen string `yaml:"listen"`
	// Advertise is the address clients dial; default: Listen's address.
	Advertise string `yaml:"advertise"`
	// VIPListen serves the broker's requests on a second port too, the
	// VIP channel Java clients up to 4.4.0 send to by default (and later
	// ones with vipChannelEnabled): "auto" is Listen's port minus 2, as
	// RocketMQ's brokers listen (10909 beside 10911), and a port that
	// cannot be had there is logged, not fatal; an address is that
	// address; empty serves none. The broker command's default is "auto".
	VIPListen string `yaml:"vipListen"`
	// NamesrvListen runs an embedded name server there; empty runs none.
	NamesrvListen string `yaml:"namesrvListen"`
	// GRPCListen serves RocketMQ 5 clients (gRPC, POP consumption) there;
	// empty serves none. The broker command's default is
	// DefaultGRPCListen.
	GRPCListen string `yaml:"grpcListen"`
	// GRPC configures the gRPC endpoint (internal/grpcserver): session
	// and waiting-receive caps, expiry, long polling, the advertised
	// address. Broker, Store, ACL, TLS and Logger are filled in.
	GRPC grpcserver.Options `yaml:"grpc"`
	// NameServers are external name servers to register with (the
	// embedded one is added automatically).
	NameServers []string `yaml:"namesrv"`
	// Store configures the store; Dir and Logger are filled in.
	Store store.Options `yaml:"store"`
	// Broker configures the broker; Store, NameServers, Filters and
	// Logger are filled in. Its keys sit at the top of the config file.
	Broker broker.Options `yaml:",inline"`
	// Remoting holds the limits of the broker's client port: connections
	// in total and per address, frame and idle deadlines, queued response
	// bytes per connection, frame size (remoting.ServerOptions, whose
	// comments give the defaults). Logger and OnClose are the broker's.
	Remoting remoting.ServerOptions `yaml:"remoting"`
	// Cluster, if set, makes this broker one member of a replicated
	// broker set (cluster.go): setName, nodeId, peers, raft's timeouts.
	// The set's leader serves clients as its master; Store's Dir and
	// Replicator and the set's DataDir/raft directory are filled in.
	Cluster *cluster.Options `yaml:"cluster"`
	// EmbeddedNamesrv configures the embedded name server.
	EmbeddedNamesrv namesrv.Options `yaml:"embeddedNamesrv"`
	// NATSBridge, if set, publishes retry and dead-letter events to NATS
	// (natsbridge.go); it turns the broker's outbox on. Source, Resender,
	// and empty Cluster, Broker and Logger are filled in.
	NATSBridge *BridgeOptions `yaml:"natsBridge"`
	// Plugins are the WASM plugins, loaded before the broker serves. If
	// any fails to load, Start fails naming it: the broker never serves
	// with part of its plugin list.
	Plugins []Plugin `yaml:"plugins"`
	// PluginSource returns the plugin list again for a reload (SIGHUP, the
	// plugins.reload admin command), typically by re-reading the config
	// file (PluginFile). Nil reloads the list last applied, which still
	// picks up changed module files and revives disabled plugins.
	PluginSource func() ([]Plugin, error) `yaml:"-"`
	// ACL is the access control of the broker's port and the embedded
	// name server's (acl.go), with RocketMQ's plain_acl.yml field names
	// (core/acl); off by default. Every problem of it is reported by
	// Start.
	ACL acl.Config `yaml:"acl" cfg:"acl"`
	// ACLSource returns the ACL again for a reload (SIGHUP, the
	// plugins.reload admin command), typically by re-reading the config
	// file (ACLFile). Nil: a reload keeps the ACL as it is.
	ACLSource func() (acl.Config, error) `yaml:"-"`
	// TLS is the TLS of the broker's port, the embedded name server's and
	// the gRPC port (tls.go): mode disabled, permissive (the default: TLS
	// and plain on each port) or enforcing, certFile and keyFile (none: a
	// self-signed certificate kept in DataDir/tls), and caFile to require
	// client certificates. Its files are read again on reload.
	TLS TLSOptions `yaml:"tls"`
	// Insecure allows listening on a non-loopback address with ACL off;
	// without it Start refuses, saying why.
	Insecure bool `yaml:"insecure"`
	// HTTPListen serves the operators' HTTP endpoint there (http.go):
	// /metrics, /healthz, /readyz, and the console at /. Empty serves
	// none, the default; the broker command's is DefaultHTTPListen.
	HTTPListen string `yaml:"httpListen"`
	// HTTPPprof adds Go's profiles under /debug/pprof/ on the HTTP
	// endpoint. Default off; on an address other than loopback it needs
	// Insecure.
	HTTPPprof bool `yaml:"httpPprof"`
	// HTTPMaxConns bounds the HTTP endpoint's open connections; more
	// wait to be accepted. Default 64.
	HTTPMaxConns int `yaml:"httpMaxConns"`
	// MetricsMaxTopics and MetricsMaxGroups cap the topics and consumer
	// groups with series of their own on /metrics; the rest are summed
	// into "_other" (internal/metrics). Default 1,000 each.
	MetricsMaxTopics int `yaml:"metricsMaxTopics"`
	MetricsMaxGroups int `yaml:"metricsMaxGroups"`
	// Console, if set, is served at / on the HTTP endpoint in place of
	// the web console (ConsoleHandler), which is served there otherwise
	// once the broker runs. Server.SetConsole sets one
	// later.
	Console http.Handler `yaml:"-"`
	// PluginCacheDir keeps the plugins' compiled code across restarts.
	// Default DataDir/plugin-cache.
	PluginCacheDir string `yaml:"pluginCacheDir"`
	// LogLevel is the level of the default Logger. Default info.
	LogLevel slog.Level `yaml:"logLevel"`
	// LogFormat is the format of the default Logger: LogText (the
	// default) or LogJSON.
	LogFormat string `yaml:"logFormat"`
	// Logger receives every component's logs. Default: LogFormat on
	// standard error at LogLevel.
	Logger *slog.Logger `yaml:"-"`
}

// defaultLogger is the Logger of a Config without one: LogFormat on
// standard error, text if LogFormat is not one (Check reports it).
func (c Config) defaultLogger() *slog.Logger {
	l, err := NewLogger(os.Stderr, c.LogFormat, c.LogLevel)
	if err != nil {
		l, _ = NewLogger(os.Stderr, LogText, c.LogLevel)
	}
	return l
}

// withDefaults returns a copy of c with its own defaults filled in; the
// components fill theirs.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = c.defaultLogger()
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	return c
}

// Server is a running broker process.
type Server struct {
	cfg    Config
	log    *slog.Logger
	Store  *store.Store
	Broker *broker.Broker
	NS     *namesrv.Server
	// nsLocal is the embedded name server's in-process listener
	// (inproc.go), which the broker registers through; nil without one.
	nsLocal *inProcListener
	GRPC    *grpcserver.Server         // nil unless GRPCListen is set, and on a set's member
	grpcLn  *grpcHandoff               // a set's member's gRPC listener (cluster.go); nil otherwise
	bridge  atomic.Pointer[natsBridge] // the running NATS bridge (natsbridge.go); a set's member runs it while it leads
	node    *cluster.Node              // a replicated set's member (cluster.go); nil otherwise
	lead    *leadership

	plugins *pluginHost
	acl     *aclGate
	tls     *tlsGate      // nil with TLS disabled
	http    *httpEndpoint // nil with HTTPListen empty

	// Readiness, as /readyz reports it; written by Start and Shutdown,
	// read by HTTP handlers.
	storeOpen, pluginsLoaded, stopping atomic.Bool
	namesrvUp                          atomic.Bool // the name server serves (readyz of a name server alone)
	broker                             atomic.Pointer[broker.Broker]
	replica                            atomic.Pointer[broker.Broker] // a set's member, while it follows (cluster.go)
	console                            atomic.Pointer[http.Handler]  // SetConsole

	// BrokerAddr and NamesrvAddr are where they listen.
	BrokerAddr  string
	NamesrvAddr string
	GRPCAddr    string // advertised
	VIPAddr     string // the VIP channel's, when one listens (a single broker)

	grpcCounts *grpcserver.Counts // the gRPC responses, across a member's roles

	wg       sync.WaitGroup
	errs     chan error
	shutdown sync.Once
}

// Start opens the store, starts the embedded name server and the broker,
// and returns once both accept connections. Nothing listens until the
// store is open and recovered.
func Start(cfg Config) (_ *Server, err error) {
	cfg = cfg.withDefaults()
	if cfg.NamesrvListen == "" && len(cfg.NameServers) == 0 {
		cfg.Logger.Warn("no name server: the embedded one is off and namesrv names none; clients will not find this broker")
	}
	if err := cfg.checkExposure(); err != nil {
		return nil, err
	}
	if cfg.TLS.Mode, err = tlsMode(cfg.TLS.Mode); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, errs: make(chan error, 3), grpcCounts: grpcserver.NewCounts()}
	gate, err := newACLGate(&cfg, cfg.Logger)
	if err != nil {
		return nil, err
	}
	s.acl = gate
	if s.tls, err = newTLSGate(cfg.TLS, cfg.DataDir, cfg.tlsHosts(), cfg.Logger); err != nil {
		return nil, err
	}
	// The HTTP endpoint comes first, so /healthz and /readyz answer
	// while the store recovers.
	if err := s.startHTTP(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.stopHTTP(context.Background())
		}
	}()

	// The store is opened and recovered before anything listens: a client
	// that connects during a slow or failing start would otherwise wait
	// for answers that never come. A store that cannot open stops the
	// start with its one error.
	so := cfg.Store
	so.Dir = cfg.DataDir
	if so.TagCode == nil {
		levels := cfg.Broker.DelayLevels
		if len(levels) == 0 {
			levels, _ = broker.ParseDelayLevels(broker.DefaultDelayLevels)
		}
		so.TagCode = broker.TagCode(levels)
	}
	if so.Logger == nil {
		so.Logger = cfg.Logger
	}
	if cfg.Cluster != nil {
		err = s.openNode(so) // cluster.go
	} else {
		s.Store, err = store.Open(so)
	}
	if err != nil {
		return nil, fmt.Errorf("broker: open the store in %s: %w", so.Dir, err)
	}
	s.storeOpen.Store(true)
	s.acl.store = s.Store
	if err := s.loadPlugins(); err != nil {
		s.closeStore()
		return nil, err
	}
	s.pluginsLoaded.Store(true)

	if cfg.NamesrvListen != "" {
		if err := s.startNamesrv(); err != nil {
			s.plugins.close(context.Background())
			s.closeStore()
			return nil, err
		}
		s.nsLocal = newInProcListener()
		s.serve(func() error { return s.NS.Serve(s.nsLocal) })
	}

	if cfg.Cluster != nil {
		// A member of a replicated set serves clients only while it
		// leads (cluster.go).
		s.registerMetrics()
		if s.http != nil && cfg.Console == nil {
			s.SetConsole(http.HandlerFunc(s.replicaConsole)) // until it leads
		}
		if cfg.GRPCListen != "" {
			if err := s.listenGRPC(); err != nil {
				s.stopNamesrv()
				s.plugins.close(context.Background())
				s.closeStore()
				return nil, err
			}
		}
		s.startLeadership()
		return s, nil
	}
	// Both ports listen before the broker is built, so its first
	// registration with the name servers carries the gRPC endpoint
	// (View.NameServerRoute).
	brokerLn, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		s.stopNamesrv()
		s.plugins.close(context.Background())
		s.closeStore()
		return nil, fmt.Errorf("broker: listen on %s: %w", cfg.Listen, err)
	}
	vipLn, err := s.listenVIP(brokerLn.Addr())
	if err != nil {
		brokerLn.Close()
		s.stopNamesrv()
		s.plugins.close(context.Background())
		s.closeStore()
		return nil, err
	}
	var grpcLn net.Listener
	if cfg.GRPCListen != "" {
		if grpcLn, err = s.listenGRPCPort(brokerLn.Addr()); err != nil {
			brokerLn.Close()
			closeAll(vipLn)
			s.stopNamesrv()
			s.plugins.close(context.Background())
			s.closeStore()
			return nil, err
		}
	}
	closeListeners := func() {
		brokerLn.Close()
		closeAll(vipLn)
		if grpcLn != nil {
			grpcLn.Close()
		}
	}
	s.Broker, err = s.newBroker(0)
	if err != nil {
		closeListeners()
		s.stopNamesrv()
		s.plugins.close(context.Background())
		s.closeStore()
		return nil, err
	}
	if err := s.startBridge(s.Broker); err != nil {
		closeListeners()
		s.stopNamesrv()
		s.plugins.close(context.Background())
		s.closeStore()
		return nil, err
	}
	s.registerMetrics()
	s.broker.Store(s.Broker)
	s.serve(func() error { return s.Broker.Serve(brokerLn, vipLn...) })
	s.BrokerAddr = s.Broker.Addr()
	for _, ln := range vipLn {
		s.VIPAddr = ln.Addr().String()
	}
	if grpcLn != nil {
		if err := s.startGRPC(grpcLn); err != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s.Shutdown(ctx)
			return nil, err
		}
	}
	if s.http != nil && cfg.Console == nil {
		// Until now / answered 404: the console reads the running broker.
		s.SetConsole(s.ConsoleHandler(s.HTTPAddr()))
	}
	return s, nil
}

// newBroker builds the broker on s.Store, with the process's plugins,
// access control, TLS and name servers; replicaID above 0 makes it a
// replicated set's replica (cluster.go).
func (s *Server) newBroker(replicaID int64) (*broker.Broker, error) {
	cfg := s.cfg
	bo := cfg.Broker
	bo.Store = s.Store
	bo.AdvertiseAddr = cfg.Advertise
	bo.NameServers = append([]string(nil), cfg.NameServers...)
	bo.GRPCAddr = s.GRPCAddr
	if s.NamesrvAddr != "" {
		bo.NameServers = append(bo.NameServers, s.NamesrvAddr)
	}
	if s.nsLocal != nil {
		// The embedded name server is reached within the process, where
		// it trusts the broker without an account (inproc.go).
		local, addr := s.nsLocal, s.NamesrvAddr
		bo.NamesrvDial = func(ctx context.Context, a string) (net.Conn, error) {
			if a == addr {
				return local.dial(ctx)
			}
			var d net.Dialer
			return d.DialContext(ctx, "tcp", a)
		}
	}
	if bo.Logger == nil {
		bo.Logger = cfg.Logger
	}
	if bo.Filters == nil {
		bo.Filters = DefaultFilters()
	}
	bo.Filters = s.plugins.filterFactories(bo.Filters)
	bo.TxnPolicy = s.txnPolicy(bo) // txn.go
	bo.GroupAllocator = s.plugins.groupAllocator
	bo.SendTransform = s.plugins.sendTransform
	cfg.bridgeBrokerOptions(&bo)
	bo.Remoting = cfg.Remoting
	bo.Remoting.Authorize = s.acl.authorizeBroker
	if s.tls != nil {
		bo.Remoting.TLS, bo.Remoting.TLSPermissive = s.tls.serverConfig(), cfg.TLS.Mode == TLSPermissive
		if cfg.TLS.Mode == TLSEnforcing {
			bo.NamesrvTLS = s.tls.clientConfig()
		}
	}
	if s.node != nil {
		bo.BrokerName = cfg.Cluster.SetName
		bo.ReplicaID = replicaID
		bo.Leader = s.leaderHint
	}
	b, err := broker.New(bo)
	if err == nil && s.node != nil {
		s.attachMembership(b) // cluster.go
	}
	if err != nil {
		return nil, err
	}
	s.plugins.reloadACL = func() error { return errors.Join(s.ReloadACL(), s.ReloadTLS()) }
	s.plugins.attach(b)
	return b, nil
}

// StartNamesrv runs a name server alone, configured by the parts of cfg a
// name server uses: NamesrvListen (required), EmbeddedNamesrv, Remoting,
// TLS, ACL (and ACLSource) and Insecure. The Server it returns has no
// broker or store; Shutdown, Err, ReloadACL and ReloadTLS work as for a
// broker process.
func StartNamesrv(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = cfg.defaultLogger()
	}
	if cfg.NamesrvListen == "" {
		return nil, errors.New("name server: no listen address")
	}
	cfg.Listen = "" // no broker port: only the name server's is exposed
	if err := cfg.checkExposure(); err != nil {
		return nil, err
	}
	var err error
	if cfg.TLS.Mode, err = tlsMode(cfg.TLS.Mode); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, errs: make(chan error, 1)}
	if s.acl, err = newACLGate(&cfg, cfg.Logger); err != nil {
		return nil, err
	}
	if s.tls, err = newTLSGate(cfg.TLS, cfg.DataDir, cfg.tlsHosts(), cfg.Logger); err != nil {
		return nil, err
	}
	if err := s.startHTTP(); err != nil {
		return nil, err
	}
	if err := s.startNamesrv(); err != nil {
		s.stopHTTP(context.Background())
		return nil, err
	}
	return s, nil
}

// startNamesrv listens on NamesrvListen and serves a name server there,
// under the process's connection limits, TLS and access control.
func (s *Server) startNamesrv() error {
	ln, err := net.Listen("tcp", s.cfg.NamesrvListen)
	if err != nil {
		return fmt.Errorf("name server: listen on %s: %w", s.cfg.NamesrvListen, err)
	}
	s.NamesrvAddr = ln.Addr().String()
	no := s.cfg.EmbeddedNamesrv
	if no.Logger == nil {
		no.Logger = s.cfg.Logger
	}
	no.Remoting = s.cfg.Remoting
	no.Remoting.Authorize = s.acl.authorizeNamesrv
	if s.tls != nil {
		no.Remoting.TLS, no.Remoting.TLSPermissive = s.tls.serverConfig(), s.cfg.TLS.Mode == TLSPermissive
	}
	s.NS = namesrv.New(no)
	s.serve(func() error { return s.NS.Serve(ln) })
	s.namesrvUp.Store(true)
	return nil
}

func (s *Server) serve(fn func() error) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := fn(); err != nil {
			s.errs <- err
		}
	}()
}

// Err delivers the first error a listener stops with.
func (s *Server) Err() <-chan error { return s.errs }

func (s *Server) stopNamesrv() {
	if s.NS != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.NS.Shutdown(ctx)
	}
}

// Shutdown stops accepting, finishes in-flight requests (until ctx ends),
// flushes and closes the store. It is safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	var errs []error
	s.shutdown.Do(func() {
		s.stopping.Store(true)
		s.stopHTTP(ctx)
		errs = append(errs, s.stopGRPC(ctx))
		if s.Broker != nil {
			errs = append(errs, s.Broker.Shutdown(ctx))
		}
		if s.NS != nil {
			errs = append(errs, s.NS.Shutdown(ctx))
		}
		errs = append(errs, s.stopLeadership(ctx))
		s.wg.Wait()
		if s.Store == nil {
			return // a name server alone (StartNamesrv)
		}
		errs = append(errs, s.stopBridge(ctx))
		errs = append(errs, s.plugins.close(ctx))
		errs = append(errs, s.closeStore())
	})
	return errors.Join(errs...)
}

// DefaultFilters are the built-in expression types: TAG and SQL92. They
// compile afresh: the broker's filter cache shares compiled filters and
// bounds them by bytes, so a second cache here would hold them unbounded.
func DefaultFilters() map[string]broker.FilterFactory {
	return map[string]broker.FilterFactory{
		broker.ExpressionTag: broker.FilterFactoryFunc(func(expr string) (broker.Filter, error) {
			return tag.Compile(expr)
		}),
		broker.ExpressionSQL92: broker.FilterFactoryFunc(func(expr string) (broker.Filter, error) {
			return sql92.Compile(expr)
		}),
	}
}

// DataPath returns a path inside the data directory.
func (s *Server) DataPath(elem ...string) string {
	return filepath.Join(append([]string{s.cfg.DataDir}, elem...)...)
}

// listenVIP opens the VIP channel's listener beside the broker's, when
// the config asks for one (Config.VIPListen): none, or one.
func (s *Server) listenVIP(broker net.Addr) ([]net.Listener, error) {
	addr := s.cfg.VIPListen
	switch addr {
	case "":
		return nil, nil
	case "auto":
		ta, ok := broker.(*net.TCPAddr)
		if !ok || ta.Port < 3 {
			return nil, nil
		}
		vip := net.JoinHostPort(ta.IP.String(), strconv.Itoa(ta.Port-2))
		ln, err := net.Listen("tcp", vip)
		if err != nil {
			s.log.Warn("broker: the VIP channel (the broker port - 2) cannot listen; Java clients with vipChannelEnabled (the default up to 4.4.0) cannot send here", "addr", vip, "err", err)
			return nil, nil
		}
		return []net.Listener{ln}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("broker: VIP channel: listen on %s: %w", addr, err)
	}
	return []net.Listener{ln}, nil
}

func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		ln.Close()
	}
}
