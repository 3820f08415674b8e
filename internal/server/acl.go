package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/allocate"
	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
	"github.com/rmq-go/rmq/internal/ratelog"
)

// Access control (core/acl) wired into the broker and the embedded name
// server: one Checker, built from Config.ACL at Start and swapped whole on
// reload, asked by both ports' Authorize hooks. The broker's hook adds the
// resources core/acl cannot see: those in request bodies and in the store.

// ErrInsecure is Start's refusal to serve a non-loopback address without
// access control.
var ErrInsecure = errors.New("server: refusing to listen on a non-loopback address without access control")

// aclGate holds the running Checker and answers the Authorize hooks.
type aclGate struct {
	checker atomic.Pointer[acl.Checker]
	// store is read for END_TRANSACTION and VIEW_MESSAGE_BY_ID; set once
	// before the broker serves.
	store   *store.Store
	refused *refusalLog

	reloadMu sync.Mutex // serializes reloads
	source   func() (acl.Config, error)
}

// newACLGate builds the Checker of cfg.ACL, or reports every problem of it.
func newACLGate(cfg *Config, log *slog.Logger) (*aclGate, error) {
	g := &aclGate{refused: newRefusalLog(log), source: cfg.ACLSource}
	c, err := acl.New(cfg.ACL)
	if err != nil {
		return nil, err
	}
	g.checker.Store(c)
	return g, nil
}

// reload re-reads the ACL (Config.ACLSource) and swaps the new Checker
// in; on any error the running one stays. It returns whether checking is
// now enabled.
func (g *aclGate) reload() (enabled bool, err error) {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	if g.source == nil {
		return g.checker.Load().Enabled(), nil
	}
	cfg, err := g.source()
	if err != nil {
		return false, err
	}
	c, err := acl.New(cfg)
	if err != nil {
		return false, err
	}
	g.checker.Store(c)
	return c.Enabled(), nil
}

// authorizeNamesrv is the name server's hook. The broker of the same
// process, connected in-process (inproc.go), is trusted unsigned.
func (g *aclGate) authorizeNamesrv(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	ch := g.checker.Load()
	if !ch.Enabled() || inProc(c.RemoteAddr()) {
		return nil
	}
	return g.answer(req, ch.Check(remoteAddr(c), req))
}

// authorizeBroker is the broker's hook: core/acl's rules plus the
// resources of bodies and stored records.
func (g *aclGate) authorizeBroker(c *remoting.Conn, req *remoting.Command) *remoting.Command {
	ch := g.checker.Load()
	if !ch.Enabled() {
		return nil
	}
	var buf [4]acl.Resource
	return g.answer(req, ch.Check(remoteAddr(c), req, g.extra(req, buf[:0])...))
}

func (g *aclGate) answer(req *remoting.Command, err error) *remoting.Command {
	if err == nil {
		return nil
	}
	g.refused.log(err)
	return remoting.NewResponse(req, remoting.NoPermission, err.Error())
}

// extra returns the resources of req that only the broker can see, in
// the body or in the store, appended to dst. A body that does not decode
// names nothing: the codes that need a resource are then refused, the
// others reach their handler, which reports the bad body.
func (g *aclGate) extra(req *remoting.Command, dst []acl.Resource) []acl.Resource {
	switch req.Code {
	case remoting.HeartBeat:
		var hb remoting.HeartbeatData
		if json.Unmarshal(req.Body, &hb) != nil {
			return dst
		}
		for _, cd := range hb.ConsumerDataSet {
			dst = append(dst, acl.GroupRes(cd.GroupName, acl.Sub))
			for _, sd := range cd.SubscriptionDataSet {
				dst = append(dst, acl.TopicRes(sd.Topic, acl.Sub))
			}
		}
	case remoting.LockBatchMQ, remoting.UnlockBatchMQ:
		var body remoting.LockBatchBody[struct {
			Topic string `json:"topic"`
		}]
		if json.Unmarshal(req.Body, &body) != nil {
			return dst
		}
		dst = append(dst, acl.GroupRes(body.ConsumerGroup, acl.Sub))
		for _, q := range body.MQSet {
			dst = append(dst, acl.TopicRes(q.Topic, acl.Sub))
		}
	case remoting.QueryAssignment:
		var body allocate.QueryAssignmentRequest
		if json.Unmarshal(req.Body, &body) != nil {
			return dst
		}
		dst = append(dst, acl.GroupRes(body.ConsumerGroup, acl.Sub), acl.TopicRes(body.Topic, acl.Sub))
	case remoting.CheckClientConfig:
		var body remoting.CheckClientBody
		if json.Unmarshal(req.Body, &body) != nil {
			return dst
		}
		dst = append(dst, acl.GroupRes(body.Group, acl.Sub))
	case remoting.EndTransaction:
		// PUB on the topic the half message was sent to.
		if rec := g.record(req, "commitLogOffset"); rec != nil {
			topic := rec.Properties().Get(message.PropertyRealTopic)
			if topic == "" {
				topic = string(rec.Topic())
			}
			dst = append(dst, acl.TopicRes(topic, acl.Pub))
		}
	case remoting.ViewMessageByID:
		// SUB on the topic the record is stored under: a half message's is
		// the system half topic, which only an account granted it sees.
		if rec := g.record(req, "offset"); rec != nil {
			dst = append(dst, acl.TopicRes(string(rec.Topic()), acl.Sub))
		}
	}
	return dst
}

// record reads the stored record at the commit-log offset in req's key,
// or returns nil.
func (g *aclGate) record(req *remoting.Command, key string) message.Record {
	if g.store == nil {
		return nil
	}
	off, err := strconv.ParseInt(req.Get(key), 10, 64)
	if err != nil || off < 0 {
		return nil
	}
	rec, err := g.store.ReadRecordAt(off)
	if err != nil {
		return nil
	}
	return rec
}

// remoteAddr is the peer's IP address; the zero Addr if it has none,
// which no address pattern matches.
func remoteAddr(c *remoting.Conn) netip.Addr {
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	default:
		ap, _ := netip.ParseAddrPort(a.String())
		return ap.Addr().Unmap()
	}
}

// refusalLogInterval is how often one kind of refusal is logged.
const refusalLogInterval = 10 * time.Second

// refusalLog logs refused requests at most once per refusalLogInterval
// per reason, with how many were not logged since, so a client hammering
// with a bad secret cannot flood the log.
type refusalLog struct{ rl *ratelog.Log }

func newRefusalLog(logger *slog.Logger) *refusalLog {
	return &refusalLog{rl: ratelog.New(logger, refusalLogInterval)}
}

func (l *refusalLog) log(err error) {
	var d *acl.Denied
	if !errors.As(err, &d) {
		l.rl.Warn("other", "acl: request refused", "err", err)
		return
	}
	l.rl.Warn(strconv.Itoa(int(d.Reason)), "acl: request refused",
		"code", remoting.RequestCode(d.Code).String(), "account", d.AccessKey, "peer", d.Remote.String(), "err", err.Error())
}

// checkExposure refuses a configuration that would serve a non-loopback
// address with access control off, unless Insecure says so.
func (c *Config) checkExposure() error {
	if c.ACL.Enabled || c.Insecure {
		return nil
	}
	var open []string
	for _, a := range []string{c.Listen, c.NamesrvListen, c.GRPCListen} {
		if a != "" && !loopback(a) {
			open = append(open, a)
		}
	}
	if len(open) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %v would let anyone on the network delete topics, rewrite offsets and register fake brokers; "+
		"turn access control on (acl: {enabled: true, accounts: ...}), listen on 127.0.0.1, or say --insecure (insecure: true) to accept the risk", ErrInsecure, open)
}

// loopback reports whether listen address a (host:port) binds loopback
// only. An empty host or a name other than localhost is not.
func loopback(a string) bool {
	host, _, err := net.SplitHostPort(a)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// ACLFile returns an ACLSource that reads the acl: section of the config
// file at path again, as strictly as at startup.
func ACLFile(path string) func() (acl.Config, error) {
	return func() (acl.Config, error) {
		var c Config
		if err := c.ReadFile(path); err != nil {
			return acl.Config{}, err
		}
		return c.ACL, nil
	}
}

// ReloadACL re-reads the ACL (Config.ACLSource) and applies it: a config
// that fails to parse or validate leaves the running one in force. SIGHUP
// and the plugins.reload admin command call it.
func (s *Server) ReloadACL() error {
	enabled, err := s.acl.reload()
	if err != nil {
		s.log.Error("acl reload refused; the previous access control stays in force", "err", err)
		return err
	}
	s.log.Info("acl reloaded", "enabled", enabled)
	return nil
}

// ACLEnabled reports whether the running access control checks requests.
func (s *Server) ACLEnabled() bool { return s.acl.checker.Load().Enabled() }
