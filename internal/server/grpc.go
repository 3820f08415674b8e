package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/grpcserver"
)

// DefaultGRPCListen is the broker command's gRPC address (RocketMQ 5
// clients); Config's default is none.
const DefaultGRPCListen = "127.0.0.1:8081"

// listenGRPCPort listens on GRPCListen and sets GRPCAddr, the address
// routes name: the config's, or the listener's (grpcAdvertise) with the
// host the broker advertises when it listens on every address. brokerLn
// is the broker port's listener address; nil on a set's member, which
// opens its broker port later and advertises the config's host.
func (s *Server) listenGRPCPort(brokerLn net.Addr) (net.Listener, error) {
	ln, err := net.Listen("tcp", s.cfg.GRPCListen)
	if err != nil {
		return nil, fmt.Errorf("grpc: listen on %s: %w", s.cfg.GRPCListen, err)
	}
	s.GRPCAddr = s.cfg.GRPC.Advertise
	if s.GRPCAddr == "" {
		brokerAddr := s.cfg.Advertise
		if ta, ok := brokerLn.(*net.TCPAddr); brokerAddr == "" && ok && !ta.IP.IsUnspecified() {
			brokerAddr = ta.String()
		}
		s.GRPCAddr = grpcAdvertise(ln.Addr(), brokerAddr)
	}
	return ln, nil
}

// startGRPC serves RocketMQ 5 clients on ln (internal/grpcserver), under
// the process's ACL and TLS mode.
func (s *Server) startGRPC(ln net.Listener) error {
	g, err := s.newGRPC(s.Broker, s.GRPCAddr, nil)
	if err != nil {
		ln.Close()
		return err
	}
	s.GRPC = g
	s.serve(func() error { return g.Serve(ln) })
	s.GRPCAddr = g.Addr()
	return nil
}

// newGRPC builds the gRPC endpoint of b, advertising advertise
// unless the config names an address; leader, when set, makes it a
// replicated set's replica's (cluster.go).
func (s *Server) newGRPC(b *broker.Broker, advertise string, leader func() (string, string)) (*grpcserver.Server, error) {
	o := s.cfg.GRPC
	o.Broker, o.Leader = b, leader
	o.Counts = s.grpcCounts
	o.BrokerName = s.cfg.Broker.BrokerName
	if s.cfg.Cluster != nil {
		o.BrokerName = s.cfg.Cluster.SetName
	}
	o.MaxBodySize = s.cfg.Broker.MaxMessageSize
	if o.Logger == nil {
		o.Logger = s.cfg.Logger
	}
	o.ACL = func() *acl.Checker { return s.acl.checker.Load() }
	if s.tls != nil {
		o.TLS, o.TLSPermissive = s.tls.serverConfig(), s.cfg.TLS.Mode == TLSPermissive
	}
	if o.HandshakeTimeout == 0 && s.cfg.Remoting.FrameReadTimeout > 0 {
		o.HandshakeTimeout = s.cfg.Remoting.FrameReadTimeout
	}
	if o.Advertise == "" {
		o.Advertise = advertise
	}
	return grpcserver.New(o)
}

// grpcAdvertise is the gRPC address routes name: the listener's, or,
// when it listens on every address, the broker's advertised host with
// the gRPC port; without one (a set's member whose config advertises
// none), the host's first non-loopback address, as the broker picks.
func grpcAdvertise(a net.Addr, brokerAddr string) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok || !ta.IP.IsUnspecified() {
		return a.String()
	}
	host, _, err := net.SplitHostPort(brokerAddr)
	if err != nil {
		host = remoting.HostIPv4().String()
	}
	return net.JoinHostPort(host, strconv.Itoa(ta.Port))
}

func (s *Server) stopGRPC(ctx context.Context) error {
	if s.grpcLn != nil {
		s.grpcLn.Close() // the member's role's endpoint stops with its role (cluster.go)
	}
	if s.GRPC == nil {
		return nil
	}
	return s.GRPC.Shutdown(ctx)
}

// grpcHandoff holds a replicated set's member's gRPC listener for the
// life of the process and hands each connection it accepts to the
// endpoint of the member's role at the time (cluster.go): the leader's,
// or a replica's naming the leader. A connection accepted between two
// roles waits for the next endpoint; a member whose store failed takes no
// role again and closes the handoff.
type grpcHandoff struct {
	ln    net.Listener
	conns chan net.Conn
	quit  chan struct{}
	once  sync.Once
}

func newGRPCHandoff(ln net.Listener) *grpcHandoff {
	return &grpcHandoff{ln: ln, conns: make(chan net.Conn), quit: make(chan struct{})}
}

// run accepts until Close; a temporary failure (out of descriptors) is
// retried after a pause, as net/http does.
func (h *grpcHandoff) run() error {
	var pause time.Duration
	for {
		c, err := h.ln.Accept()
		if err != nil {
			select {
			case <-h.quit:
				return nil
			default:
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() {
				pause = min(max(2*pause, 5*time.Millisecond), time.Second)
				select {
				case <-time.After(pause):
					continue
				case <-h.quit:
					return nil
				}
			}
			return fmt.Errorf("grpc: accept: %w", err)
		}
		pause = 0
		select {
		case h.conns <- c:
		case <-h.quit:
			c.Close()
			return nil
		}
	}
}

// Close stops accepting; the endpoints' listeners end with it.
func (h *grpcHandoff) Close() error {
	var err error
	h.once.Do(func() {
		close(h.quit)
		err = h.ln.Close()
	})
	return err
}

// listener returns a listener for one endpoint: it takes the handed-off
// connections until it is closed (the endpoint's Shutdown) or the
// handoff is.
func (h *grpcHandoff) listener() net.Listener {
	return &handoffListener{h: h, done: make(chan struct{})}
}

type handoffListener struct {
	h    *grpcHandoff
	done chan struct{}
	once sync.Once
}

func (l *handoffListener) Accept() (net.Conn, error) {
	select {
	case <-l.done: // a closed endpoint takes no connection the next may
		return nil, net.ErrClosed
	default:
	}
	select {
	case c := <-l.h.conns:
		return c, nil
	case <-l.done:
	case <-l.h.quit:
	}
	return nil, net.ErrClosed
}

func (l *handoffListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *handoffListener) Addr() net.Addr { return l.h.ln.Addr() }
