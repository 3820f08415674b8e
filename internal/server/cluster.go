package server

import (
	"bytes"
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
	"github.com/rmq-go/rmq/internal/grpcserver"
)

// A member of a replicated broker set (Config.Cluster) opens its store
// through core/cluster and runs its broker in one of two roles on the same
// port: while it leads, as the set's master (brokerId 0 under the set's
// name), taking writes; otherwise as a replica (brokerId = its place in
// the peer list + 1) that serves pulls and other reads from the
// replicated store and refuses writes (core/broker, Options.ReplicaID).
// Each change of role stops one broker, which unregisters, and starts the
// other. /readyz is 200 on the master only; /cluster is every member's
// view of the set; the console at / is the master's, and a replica's
// answers 503 naming the leader. The NATS bridge (natsbridge.go) runs
// on the master only: it starts after the master's broker and stops
// before it, so it moves with leadership; its cursor and epoch are the
// store's and replicate with the set, and a new leader's bridge resumes
// from the cursor it applied (never past what was published: the cursor
// moves only over acknowledged events, and a member applies the round
// holding an event before any cursor entry past it). A replica's broker
// answers the bridge's commands by naming the leader.
//
// With grpcListen set, every member listens there for the life of the
// process (grpcHandoff, grpc.go) and runs a gRPC endpoint for its role,
// started after the role's broker and stopped before it (its Shutdown
// waits for every handler, so none uses a stopped broker). The master's
// serves everything, with the POP state read from the replicated store;
// it first writes its advertised gRPC address to the store's metadata
// (grpc/endpoint/<node id>), so every member can name it. A replica's
// answers QueryRoute and QueryAssignment with queues on the leader's
// gRPC address and refuses the rest with HA_NOT_AVAILABLE naming the
// leader (internal/grpcserver, Options.Leader).

// role is what a member's broker serves as.
type role int

const (
	roleNone role = iota
	roleReplica
	roleMaster
	roleFailed // the member's store failed: it serves nothing until restarted
)

// leadership runs the member's broker in the role raft gives it.
type leadership struct {
	changes chan role // roleMaster, roleReplica, roleFailed; roleNone restarts the current role (a restored store)
	quit    chan struct{}
	done    chan struct{}
	serving sync.WaitGroup // the running broker's Serve, and its gRPC endpoint's
	b       *broker.Broker // owned by the loop
	g       *grpcserver.Server
	role    role
}

// grpcEndpointMeta prefixes the metadata key holding a member's
// advertised gRPC address, written by the member when it starts to lead.
const grpcEndpointMeta = "grpc/endpoint/"

// listenGRPC opens a member's gRPC listener, which its roles' endpoints
// share for the life of the process.
func (s *Server) listenGRPC() error {
	ln, err := s.listenGRPCPort(nil) // grpc.go
	if err != nil {
		return err
	}
	s.grpcLn = newGRPCHandoff(ln)
	s.serve(s.grpcLn.run)
	return nil
}

// startRoleGRPC starts the gRPC endpoint of role r on b, once b serves:
// its sends read what b's Serve sets up.
func (s *Server) startRoleGRPC(b *broker.Broker, r role) error {
	b.Addr() // returns once b's Serve has started
	var leader func() (string, string)
	if r == roleMaster {
		// Where a replica's routes send clients: the store's metadata
		// replicates, so every member reads it.
		key := grpcEndpointMeta + s.cfg.Cluster.NodeID
		if v, err := s.Store.Meta(key); err != nil || string(v) != s.GRPCAddr {
			if err := s.Store.PutMeta(key, []byte(s.GRPCAddr)); err != nil {
				return fmt.Errorf("grpc: record this leader's address for the replicas: %w", err)
			}
		}
	} else {
		st := s.Store
		leader = func() (string, string) {
			id, current := s.node.LeaderContact()
			switch {
			case id == "":
				return "", ""
			case !current:
				// Silent past its heartbeats: likely dead, and routes to it
				// would hold a client there until its next refresh.
				return "", "node " + id + " (not heard from lately: an election may be under way)"
			}
			v, err := st.Meta(grpcEndpointMeta + id)
			if err != nil {
				return "", "node " + id
			}
			return string(v), "node " + id
		}
	}
	g, err := s.newGRPC(b, s.GRPCAddr, leader) // grpc.go
	if err != nil {
		return err
	}
	s.lead.g = g
	s.lead.serving.Add(1)
	go func() {
		defer s.lead.serving.Done()
		// The listener ends with the process (net.ErrClosed): no failure.
		if err := g.Serve(s.grpcLn.listener()); err != nil && !errors.Is(err, net.ErrClosed) {
			s.log.Error("gRPC endpoint failed", "err", err)
		}
	}()
	return nil
}

// clusterRefusals says which parts of cfg a set's member cannot run.
func (c Config) clusterRefusals() error {
	if c.Cluster.SetName == "" || c.Cluster.NodeID == "" || len(c.Cluster.Peers) == 0 {
		return errors.New("cluster: setName, nodeId and peers are all required")
	}
	if c.TLS.Mode == TLSDisabled || c.TLS.CAFile == "" {
		// Whoever reaches raft's port can append to the set's log.
		var open []string
		for _, p := range c.Cluster.Peers {
			if !loopback(p.Addr) {
				open = append(open, p.Addr)
			}
		}
		if len(open) > 0 && !c.Insecure {
			return fmt.Errorf("%w: raft's port %v would take the set's data from anyone who reaches it; "+
				"turn TLS on with a caFile (tls: {mode: enforcing, certFile, keyFile, caFile}), so members prove themselves with certificates, "+
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
	if err := s.checkBridge(); err != nil { // natsbridge.go
		return err
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
	s.lead = &leadership{changes: make(chan role, 64), quit: make(chan struct{}), done: make(chan struct{})}
	co.OnLeader = func() { s.lead.changes <- roleMaster }
	co.OnFollower = func() { s.lead.changes <- roleReplica }
	co.OnRestore = func() { s.lead.changes <- roleNone }
	co.OnFail = func(err error) {
		s.log.Error("this member's store failed and it left its set: it serves nothing until restarted, "+
			"which recovers its store and catches it up from the others", "err", err)
		s.lead.changes <- roleFailed
	}
	node, err := cluster.Open(co)
	if err != nil {
		return err
	}
	s.node, s.Store = node, node.Store()
	return nil
}

// Node returns the member's raft node, or nil outside a replicated set.
func (s *Server) Node() *cluster.Node { return s.node }

// startLeadership follows the member's role from here on, starting as a
// replica unless it leads already.
func (s *Server) startLeadership() {
	go func() {
		defer close(s.lead.done)
		if !s.node.Leading() {
			s.startServing(roleReplica)
		}
		for {
			select {
			case <-s.lead.quit:
				s.stopServing()
				return
			case r := <-s.lead.changes:
				if s.lead.role == roleFailed {
					continue // for good, until the process restarts
				}
				if r == roleNone {
					r = s.lead.role // the store was replaced: start again on it
				}
				s.stopServing()
				s.startServing(r)
			}
		}
	}()
}

// replicaID is this member's brokerId as a replica: its place among the
// peers, plus one.
func (s *Server) replicaID() int64 {
	for i, p := range s.cfg.Cluster.Peers {
		if p.ID == s.cfg.Cluster.NodeID {
			return int64(i + 1)
		}
	}
	return int64(len(s.cfg.Cluster.Peers) + 1)
}

// startServing runs the broker on the member's store in role r. A leader
// whose broker cannot start hands leadership on.
func (s *Server) startServing(r role) {
	if r == roleFailed {
		s.lead.role = r
		if s.grpcLn != nil {
			// No endpoint will take a connection again: clients are
			// refused at once and turn to another member.
			s.grpcLn.Close()
		}
		return
	}
	if r == roleNone {
		return
	}
	s.Store = s.node.Store() // a snapshot may have replaced it
	s.acl.store = s.Store
	var id int64
	if r == roleReplica {
		id = s.replicaID()
	}
	b, err := s.newBroker(id)
	var ln net.Listener
	var vipLn []net.Listener
	if err == nil {
		ln, err = net.Listen("tcp", s.cfg.Listen)
		if err == nil {
			if vipLn, err = s.listenVIP(ln.Addr()); err != nil {
				ln.Close()
			}
		}
		if err != nil {
			b.Shutdown(context.Background())
		}
	}
	if err != nil {
		if r == roleMaster {
			s.log.Error("leading the set but the broker cannot start: handing leadership on", "err", err)
			s.node.StepDown()
		} else {
			s.log.Error("the replica's broker cannot start", "err", err)
		}
		return
	}
	s.lead.b, s.lead.role = b, r
	s.lead.serving.Add(1)
	go func() {
		defer s.lead.serving.Done()
		if err := b.Serve(ln, vipLn...); err != nil {
			s.log.Error("broker port failed", "err", err)
		}
	}()
	if s.grpcLn != nil {
		if err := s.startRoleGRPC(b, r); err != nil {
			if r == roleMaster {
				s.log.Error("leading the set but the gRPC endpoint cannot start: handing leadership on", "err", err)
				s.node.StepDown()
			} else {
				s.log.Error("the replica's gRPC endpoint cannot start", "err", err)
			}
		}
	}
	if r == roleMaster {
		if err := s.startBridge(b); err != nil { // natsbridge.go
			// Retrying cannot fix what stops it (New checked the options
			// when the member opened): another leader would fail alike.
			s.log.Error("leading the set but the NATS bridge cannot start", "err", err)
			b.Admin().Handle(BridgeStatusCommand, func(context.Context, json.RawMessage) (any, error) {
				return nil, fmt.Errorf("the NATS bridge did not start on this leader: %w", err)
			})
		}
		s.broker.Store(b)
		if s.http != nil && s.cfg.Console == nil {
			s.SetConsole(s.consoleFor(s.HTTPAddr(), b, s.Store))
		}
		s.log.Info("serving as the set's master", "set", s.cfg.Cluster.SetName, "listen", b.Addr())
	} else {
		s.attachReplicaBridge(b) // natsbridge.go
		s.replica.Store(b)
		s.log.Info("serving as a replica", "set", s.cfg.Cluster.SetName, "broker_id", id, "listen", b.Addr())
	}
}

// stopServing stops the broker, if it runs.
func (s *Server) stopServing() {
	b := s.lead.b
	if b == nil {
		return
	}
	r := s.lead.role
	s.lead.b = nil
	s.broker.Store(nil)
	s.replica.Store(nil)
	if g := s.lead.g; g != nil {
		// Before the broker: Shutdown returns once no handler runs.
		s.lead.g = nil
		gctx, gcancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := g.Shutdown(gctx); err != nil {
			s.log.Warn("stopping the gRPC endpoint", "err", err)
		}
		gcancel()
	}
	if r == roleMaster && s.http != nil && s.cfg.Console == nil {
		s.SetConsole(http.HandlerFunc(s.replicaConsole))
	}
	bctx, bcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer bcancel()
	if err := s.stopBridge(bctx); err != nil { // before its source, the broker
		s.log.Warn("stopping the NATS bridge", "err", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		s.log.Warn("stopping the broker", "err", err)
	}
	s.lead.serving.Wait()
	if r == roleMaster {
		s.log.Info("stopped serving as the set's master", "set", s.cfg.Cluster.SetName)
	}
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

// replicaConsole answers the console's pages on a member that does not
// lead: the console is the master's.
func (s *Server) replicaConsole(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintf(w, "This member of broker set %s is a replica: the console is served by the set's leader (node %q).\n",
		s.cfg.Cluster.SetName, s.node.LeaderID())
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

// leaderHint names the set's leader for the broker's refusals: its node
// id and raft address (the members know each other by those), or "".
func (s *Server) leaderHint() string {
	id := s.node.LeaderID()
	if id == "" {
		return ""
	}
	for _, p := range s.cfg.Cluster.Peers {
		if p.ID == id {
			return fmt.Sprintf("node %s, raft address %s", id, p.Addr)
		}
	}
	return "node " + id
}

// ReplicaBrokerAddr returns the address the broker serves on while this
// member follows, or "".
func (s *Server) ReplicaBrokerAddr() string {
	if b := s.replica.Load(); b != nil {
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
		Serving string `json:"serving,omitempty"` // the master's broker address, on the leader
		Replica string `json:"replica,omitempty"` // the replica's broker address, on the others
		GRPC    string `json:"grpc,omitempty"`    // this member's advertised gRPC address
	}{Status: s.node.Status(), Serving: s.LeaderBrokerAddr(), GRPC: s.GRPCAddr}
	if b := s.replica.Load(); b != nil {
		st.Replica = b.Addr()
	}
	json.NewEncoder(w).Encode(st)
}

// Admin commands of a set's membership, served by every member's broker;
// a member that does not lead answers with the leader's id.
const (
	AddMemberCommand      = "cluster.add-member"
	RemoveMemberCommand   = "cluster.remove-member"
	TransferLeaderCommand = "cluster.transfer-leader"
)

// MemberArgs are the arguments of the membership commands: the member's
// id, and for AddMemberCommand its raft address. TransferLeaderCommand
// takes an empty ID for "any other member".
type MemberArgs struct {
	ID   string `json:"id"`
	Addr string `json:"addr,omitempty"`
}

// attachMembership registers the membership commands with b.
func (s *Server) attachMembership(b *broker.Broker) {
	decode := func(raw json.RawMessage) (MemberArgs, error) {
		var a MemberArgs
		if len(raw) == 0 {
			return a, nil
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		err := dec.Decode(&a)
		return a, err
	}
	b.Admin().HandleOnReplica(AddMemberCommand, func(_ context.Context, raw json.RawMessage) (any, error) {
		a, err := decode(raw)
		if err != nil {
			return nil, err
		}
		if err := s.node.AddMember(cluster.Peer{ID: a.ID, Addr: a.Addr}); err != nil {
			return nil, err
		}
		return s.node.Status(), nil
	})
	b.Admin().HandleOnReplica(RemoveMemberCommand, func(_ context.Context, raw json.RawMessage) (any, error) {
		a, err := decode(raw)
		if err != nil {
			return nil, err
		}
		if err := s.node.RemoveMember(a.ID); err != nil {
			return nil, err
		}
		return s.node.Status(), nil
	})
	b.Admin().HandleOnReplica(TransferLeaderCommand, func(_ context.Context, raw json.RawMessage) (any, error) {
		a, err := decode(raw)
		if err != nil {
			return nil, err
		}
		if err := s.node.TransferLeadership(a.ID); err != nil {
			return nil, err
		}
		return s.node.Status(), nil
	})
}
