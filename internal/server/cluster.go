package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/cluster"
	"github.com/rmq-go/rmq/core/store"
)

// A member of a replicated broker set (Config.Cluster) opens its store
// through core/cluster and serves clients only while it leads: the broker
// (its port, its registrations as brokerId 0 under the set's name) starts
// when the member becomes the writable leader and stops when it stops
// being one, unregistering if it still can. Replicas serve no clients;
// their HTTP endpoint answers /healthz, /readyz (503, naming the leader)
// and /cluster. The gRPC endpoint, the NATS bridge, the console and the
// broker's metrics are not run by a set's members yet; Start refuses a
// configuration asking for them.

// leadership runs the broker while the member leads.
type leadership struct {
	changes chan bool
	quit    chan struct{}
	done    chan struct{}
	serving sync.WaitGroup // the running broker's Serve
	b       *broker.Broker // owned by the loop
}

// clusterRefusals says which parts of cfg a set's member cannot run.
func (c Config) clusterRefusals() error {
	var errs []error
	if c.NATSBridge != nil {
		errs = append(errs, errors.New("natsBridge"))
	}
	if c.Console != nil {
		errs = append(errs, errors.New("console"))
	}
	if len(errs) > 0 {
		return fmt.Errorf("cluster: not yet supported on a replicated set's member: %w", errors.Join(errs...))
	}
	if c.Cluster.SetName == "" || c.Cluster.NodeID == "" || len(c.Cluster.Peers) == 0 {
		return errors.New("cluster: setName, nodeId and peers are all required")
	}
	if c.TLS.Mode == TLSOff || c.TLS.CAFile == "" {
		// Whoever reaches raft's port can append to the set's log.
		var open []string
		for _, p := range c.Cluster.Peers {
			if !loopback(p.Addr) {
				open = append(open, p.Addr)
			}
		}
		if len(open) > 0 && !c.Insecure {
			return fmt.Errorf("%w: raft's port %v would take the set's data from anyone who reaches it; "+
				"turn TLS on with a caFile (tls: {mode: on, certFile, keyFile, caFile}), so members prove themselves with certificates, "+
				"keep the set on 127.0.0.1, or say --insecure (insecure: true) on a network only the members reach", ErrInsecure, open)
		}
	}
	return nil
}

// openNode opens the member's raft state and its store.
func (s *Server) openNode(so store.Options) error {
	if err := s.cfg.clusterRefusals(); err != nil {
		return err
	}
	if s.cfg.GRPCListen != "" {
		s.log.Warn("the gRPC endpoint is off on a replicated set's member", "grpcListen", s.cfg.GRPCListen)
		s.cfg.GRPCListen = ""
	}
	co := *s.cfg.Cluster
	if s.tls != nil && s.cfg.TLS.CAFile != "" {
		co.TLS, co.DialTLS = s.tls.serverConfig(), s.tls.clientConfig()
	}
	co.Dir = filepath.Join(s.cfg.DataDir, "raft")
	co.Store = so
	if co.Logger == nil {
		co.Logger = s.log
	}
	s.lead = &leadership{changes: make(chan bool, 64), quit: make(chan struct{}), done: make(chan struct{})}
	co.OnLeader = func() { s.lead.changes <- true }
	co.OnFollower = func() { s.lead.changes <- false }
	node, err := cluster.Open(co)
	if err != nil {
		return err
	}
	s.node, s.Store = node, node.Store()
	return nil
}

// Node returns the member's raft node, or nil outside a replicated set.
func (s *Server) Node() *cluster.Node { return s.node }

// startLeadership follows the member's leadership from here on.
func (s *Server) startLeadership() {
	go func() {
		defer close(s.lead.done)
		for {
			select {
			case <-s.lead.quit:
				s.stopServing()
				return
			case leading := <-s.lead.changes:
				if leading {
					s.startServing()
				} else {
					s.stopServing()
				}
			}
		}
	}()
}

// startServing runs the broker on the member's store. A leader that
// cannot serve hands leadership on.
func (s *Server) startServing() {
	if s.lead.b != nil {
		return
	}
	s.Store = s.node.Store() // a snapshot may have replaced it
	s.acl.store = s.Store
	b, err := s.newBroker()
	var ln net.Listener
	if err == nil {
		ln, err = net.Listen("tcp", s.cfg.Listen)
		if err != nil {
			b.Shutdown(context.Background())
		}
	}
	if err != nil {
		s.log.Error("leading the set but the broker cannot start: handing leadership on", "err", err)
		s.node.StepDown()
		return
	}
	s.lead.b = b
	s.lead.serving.Add(1)
	go func() {
		defer s.lead.serving.Done()
		if err := b.Serve(ln); err != nil {
			s.log.Error("broker port failed", "err", err)
		}
	}()
	s.broker.Store(b)
	s.log.Info("serving as the set's master", "set", s.cfg.Cluster.SetName, "listen", b.Addr())
}

// stopServing stops the broker, if it runs.
func (s *Server) stopServing() {
	b := s.lead.b
	if b == nil {
		return
	}
	s.lead.b = nil
	s.broker.Store(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		s.log.Warn("stopping the broker", "err", err)
	}
	s.lead.serving.Wait()
	s.log.Info("stopped serving: no longer the set's leader", "set", s.cfg.Cluster.SetName)
}

// stopLeadership stops following leadership and the broker with it.
func (s *Server) stopLeadership(ctx context.Context) error {
	if s.lead == nil {
		return nil
	}
	select {
	case <-s.lead.quit:
	default:
		close(s.lead.quit)
	}
	select {
	case <-s.lead.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// closeStore closes the store, or the member's node with its store.
func (s *Server) closeStore() error {
	if s.node != nil {
		return s.node.Close()
	}
	return s.Store.Close()
}

// LeaderBrokerAddr returns the address the broker serves on while this
// member leads, or "".
func (s *Server) LeaderBrokerAddr() string {
	if b := s.broker.Load(); b != nil {
		return b.Addr()
	}
	return ""
}

// clusterStatus is /cluster: the member's view of its set, as JSON.
func (s *Server) clusterStatus(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if s.node == nil {
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintln(w, `{"error":"not a member of a replicated broker set"}`)
		return
	}
	st := struct {
		cluster.Status
		Serving string `json:"serving,omitempty"`
	}{s.node.Status(), s.LeaderBrokerAddr()}
	json.NewEncoder(w).Encode(st)
}
