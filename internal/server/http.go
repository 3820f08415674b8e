package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/netutil"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/metrics"
)

// The HTTP endpoint serves operators, not clients:
//
//	/metrics          Prometheus exposition (internal/metrics)
//	/healthz          200 while the process runs
//	/readyz           200 once the store is recovered, the plugins are
//	                  loaded and the broker's last registration reached a
//	                  name server; 503 with the first missing step otherwise
//	/cluster          a replicated set's member: its view of the set as JSON
//	/debug/pprof/...  Go's profiles, only with HTTPPprof
//	/                 the web console (ConsoleHandler, or Config.Console), 404 until the broker runs
//
// It listens before the store opens, so /healthz and /readyz answer during
// a long recovery, and stops first at shutdown, so no scrape reads a
// closing store. It is plain HTTP: metrics are read-only, and profiles on
// an address other than loopback need Insecure.

// Defaults of the HTTP endpoint.
const (
	DefaultHTTPListen   = "127.0.0.1:8080" // the broker command's; Config's default is none
	DefaultHTTPMaxConns = 64
)

// Timeouts and sizes of the HTTP endpoint. A CPU profile or trace runs as
// long as its seconds parameter asks, within httpWriteTimeout.
const (
	httpReadHeaderTimeout = 5 * time.Second
	httpReadTimeout       = 10 * time.Second
	httpWriteTimeout      = 2 * time.Minute
	httpIdleTimeout       = time.Minute
	httpMaxHeaderBytes    = 16 << 10
	httpMaxScrapes        = 4 // concurrent /metrics requests; more get 503
)

// httpEndpoint is the running HTTP server.
type httpEndpoint struct {
	srv  *http.Server
	ln   net.Listener
	reg  *prometheus.Registry
	done chan struct{} // closed when Serve returned
}

// startHTTP listens on HTTPListen and serves the endpoint there; it is a
// no-op when HTTPListen is empty.
func (s *Server) startHTTP() error {
	c := &s.cfg
	if c.HTTPListen == "" {
		return nil
	}
	if c.HTTPPprof && !c.Insecure && !loopback(c.HTTPListen) {
		return fmt.Errorf("%w: Go profiles (httpPprof) on %s would show anyone on the network the process's memory and code; "+
			"listen on 127.0.0.1, or say --insecure (insecure: true) to accept the risk", ErrInsecure, c.HTTPListen)
	}
	maxConns := c.HTTPMaxConns
	if maxConns <= 0 {
		maxConns = DefaultHTTPMaxConns
	}
	ln, err := net.Listen("tcp", c.HTTPListen)
	if err != nil {
		return fmt.Errorf("http: listen on %s: %w", c.HTTPListen, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            slogPrinter{s},
		MaxRequestsInFlight: httpMaxScrapes,
		Timeout:             httpReadTimeout,
	}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if reason := s.notReady(); reason != "" {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "not ready:", reason)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("GET /cluster", s.clusterStatus) // cluster.go
	if c.HTTPPprof {
		mux.HandleFunc("GET /debug/pprof/", pprof.Index)
		mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	}
	if c.Console != nil {
		s.SetConsole(c.Console)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if h := s.console.Load(); h != nil {
			(*h).ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	})
	h := &httpEndpoint{
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: httpReadHeaderTimeout,
			ReadTimeout:       httpReadTimeout,
			WriteTimeout:      httpWriteTimeout,
			IdleTimeout:       httpIdleTimeout,
			MaxHeaderBytes:    httpMaxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		},
		ln:   netutil.LimitListener(ln, maxConns),
		reg:  reg,
		done: make(chan struct{}),
	}
	s.http = h
	s.serve(func() error {
		defer close(h.done)
		if err := h.srv.Serve(h.ln); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	return nil
}

// registerMetrics adds the broker's collector to the endpoint once the
// broker is built.
func (s *Server) registerMetrics() {
	if s.http == nil {
		return
	}
	o := metrics.Options{
		Store:     s.Store,
		Broker:    s.Broker,
		Plugins:   s.plugins.reg,
		Bridge:    s.Bridge,
		MaxTopics: s.cfg.MetricsMaxTopics,
		MaxGroups: s.cfg.MetricsMaxGroups,
	}
	if s.cfg.GRPCListen != "" {
		o.GRPC = s.grpcCounts
	}
	if s.node != nil {
		// A set's member: its broker runs while it leads (cluster.go).
		o.Source = func() (*store.Store, *broker.Broker) { return s.node.Store(), s.broker.Load() }
		o.Cluster = s.node.Status
	}
	s.http.reg.MustRegister(metrics.New(o))
}

// httpDrain bounds how long shutdown waits for HTTP requests in flight
// (a long profile); then their connections are closed.
const httpDrain = 5 * time.Second

// stopHTTP stops the endpoint, letting requests in flight finish for up
// to httpDrain (or until ctx ends), then closing what is left: an HTTP
// request never holds up the broker's shutdown.
func (s *Server) stopHTTP(ctx context.Context) error {
	if s.http == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, httpDrain)
	defer cancel()
	if err := s.http.srv.Shutdown(ctx); err != nil {
		s.log.Warn("http: requests cut short by shutdown", "err", err)
		s.http.srv.Close()
	}
	<-s.http.done
	return nil
}

// SetConsole serves h at / on the HTTP endpoint from now on, in place of
// Config.Console (a console built after Start, from the running Server);
// nil serves 404 again.
func (s *Server) SetConsole(h http.Handler) {
	if h == nil {
		s.console.Store(nil)
		return
	}
	s.console.Store(&h)
}

// HTTPAddr returns the address the HTTP endpoint listens on, or "" when
// it is off.
func (s *Server) HTTPAddr() string {
	if s.http == nil {
		return ""
	}
	return s.http.ln.Addr().String()
}

// notReady returns why the broker (or a name server alone) is not ready,
// or "".
func (s *Server) notReady() string {
	switch {
	case s.stopping.Load():
		return "shutting down"
	case s.cfg.Listen == "":
		// A name server alone: ready once it serves.
		if !s.namesrvUp.Load() {
			return "name server: starting"
		}
		return ""
	case !s.storeOpen.Load():
		return "store: opening and recovering"
	case !s.pluginsLoaded.Load():
		return "plugins: loading"
	}
	b := s.broker.Load()
	switch {
	case b == nil && s.node != nil:
		return fmt.Sprintf("replica of set %s: the leader (%q) serves clients", s.cfg.Cluster.SetName, s.node.LeaderID())
	case b == nil:
		return "broker: starting"
	case !b.Ready():
		return "name server: not registered yet (or the last registration reached none)"
	}
	return ""
}

// slogPrinter logs promhttp's errors through the server's logger.
type slogPrinter struct{ s *Server }

func (p slogPrinter) Println(v ...any) { p.s.log.Warn("metrics: " + fmt.Sprint(v...)) }
