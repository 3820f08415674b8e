package server

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/internal/grpcserver"
)

// DefaultGRPCListen is the broker command's gRPC address (RocketMQ 5
// clients); Config's default is none.
const DefaultGRPCListen = "127.0.0.1:8081"

// startGRPC serves RocketMQ 5 clients on GRPCListen (internal/grpcserver),
// under the process's ACL and TLS mode.
func (s *Server) startGRPC() error {
	ln, err := net.Listen("tcp", s.cfg.GRPCListen)
	if err != nil {
		return fmt.Errorf("grpc: listen on %s: %w", s.cfg.GRPCListen, err)
	}
	o := s.cfg.GRPC
	o.Broker, o.Store = s.Broker, s.Store
	o.BrokerName = s.cfg.Broker.BrokerName
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
		o.Advertise = grpcAdvertise(ln.Addr(), s.BrokerAddr)
	}
	g, err := grpcserver.New(o)
	if err != nil {
		ln.Close()
		return err
	}
	s.GRPC = g
	s.serve(func() error { return g.Serve(ln) })
	s.GRPCAddr = g.Addr()
	return nil
}

// grpcAdvertise is the gRPC address routes name: the listener's, or,
// when it listens on every address, the broker's advertised host with
// the gRPC port.
func grpcAdvertise(a net.Addr, brokerAddr string) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok || !ta.IP.IsUnspecified() {
		return a.String()
	}
	host, _, err := net.SplitHostPort(brokerAddr)
	if err != nil {
		return a.String()
	}
	return net.JoinHostPort(host, strconv.Itoa(ta.Port))
}

func (s *Server) stopGRPC(ctx context.Context) error {
	if s.GRPC == nil {
		return nil
	}
	return s.GRPC.Shutdown(ctx)
}
