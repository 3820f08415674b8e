package remoting

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Handler serves one request. A non-nil return is the response: the
// server sets its Opaque, FlagResponse and SerializeType from req (and
// Language and Version when zero) and writes it, so a handler may use
// NewResponse or build the Command itself. Nil means no response now:
// either the request needs none, or the handler keeps req and answers
// later with c.Reply (long polling holds pulls this way). The response to a
// oneway request is dropped.
//
// Handlers run concurrently, one goroutine per request; req and its Body
// belong to the handler. A handler should not wait for a response on its
// own connection: while the in-flight limit is reached the reader does not
// read, so that response would not arrive before ctx ends.
type Handler func(c *Conn, req *Command) *Command

// FastHandler serves a request on its connection's reader goroutine, so
// it must not block: no waiting on locks held across I/O, on the disk or
// on other requests. It either takes the request and returns true, and
// then calls reply exactly once, at once or later from any goroutine
// (after the fsync that covers a send, say), with the response, or nil
// for none; or it returns false without calling reply, and the request
// goes to the code's Handler on a worker goroutine as if no FastHandler
// were registered. reply never blocks. A request taken holds its
// connection's handler slot (MaxInflightPerConn) until it is answered,
// and a graceful shutdown waits for its answer as for a running Handler.
// Taking the common case on the reader saves a goroutine hand-off per
// request, and answers given together (one group commit's) leave in one
// write per connection.
//
// The request's extFields may still be unparsed, which saves building a
// map per request: read them through its methods (Get and the like) or
// DecodeSendHeaderOf, which fill or skip the map as needed, not through
// the ExtFields field.
//
// The request's Body points into the connection's read buffer, which the
// next frame overwrites: it is valid only until the FastHandler returns,
// and a handler that takes the request and needs the body later must copy
// it. (A send copies it into the store's round before it returns.) A
// declined request gets its own copy before it goes to the Handler.
type FastHandler func(c *Conn, req *Command, reply func(resp *Command)) bool

// ServerOptions configures a Server. The zero value of each field means its
// default; negative values are invalid. The yaml tags name each field in
// the broker's config file (section remoting:); cfg:"size" marks sizes
// written with a unit ("64MiB").
type ServerOptions struct {
	// MaxFrameSize is the largest frame accepted, counted after the length
	// prefix; default DefaultMaxFrameSize (16 MiB). A larger frame is logged
	// and closes its connection. A response larger than this is not sent:
	// the peer gets ResponseNotEncodable instead.
	MaxFrameSize int `yaml:"maxFrameSize" cfg:"size"`
	// MaxInflightPerConn is how many handlers may run at once for one
	// connection; default 4096. When all are busy the connection's reader
	// waits, which pushes back on the peer. Held requests whose handler has
	// returned do not count.
	MaxInflightPerConn int `yaml:"maxInflightPerConn"`
	// MaxQueuedBytesPerConn bounds the response bytes built and not yet
	// written to one connection, large bodies sent by reference included;
	// default 64 MiB. At the bound, handlers wait to queue their response
	// and the reader starts no new handler, until the peer has read enough:
	// a peer that does not read pins at most this plus the responses of
	// the handlers already running (MaxInflightPerConn of them at worst).
	MaxQueuedBytesPerConn int `yaml:"maxQueuedBytesPerConn" cfg:"size"`
	// MaxQueuedBytes bounds the response bytes built and not yet written
	// over all connections; default 256 MiB. Handlers that build large
	// responses (pulls) size them to what is left of it and of their
	// connection's MaxQueuedBytesPerConn (Conn.ReserveResponse).
	MaxQueuedBytes int `yaml:"maxQueuedBytes" cfg:"size"`
	// MaxPartialFrameBytes bounds the bytes held by frames not yet read
	// whole, over all connections; default 64 MiB, and at least
	// MaxFrameSize. A frame counts as its bytes arrive, so a peer that
	// stalls mid-frame holds what it sent. At the bound, readers wait
	// for room; when frames that have had no new bytes for a second hold
	// the budget, the largest of them is dropped with its connection.
	MaxPartialFrameBytes int `yaml:"maxPartialFrameBytes" cfg:"size"`
	// WriteTimeout bounds each write to a peer; default 30 s. A write that
	// times out closes the connection.
	WriteTimeout time.Duration `yaml:"writeTimeout"`
	// FrameReadTimeout is how long a frame may take to arrive whole once
	// its first byte has; default 10 s (16 MiB then needs 13.4 Mbit/s). A
	// frame that takes longer closes its connection, so a peer trickling a
	// large frame cannot hold its buffer for long.
	FrameReadTimeout time.Duration `yaml:"frameReadTimeout"`
	// IdleTimeout closes a connection that sends no frame for this long;
	// default 120 s, as RocketMQ's brokers (clients heartbeat every 30 s).
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// MaxConns is how many connections the server keeps open at once;
	// default 10,000, or three quarters of the process's file descriptor
	// limit when that is lower. A connection over the limit is closed as
	// soon as it is accepted; open ones are unaffected.
	MaxConns int `yaml:"maxConns"`
	// MaxConnsPerAddr is how many connections one source IP address may
	// hold at once; default 1,000. Over it a new connection from that
	// address is closed as soon as it is accepted.
	MaxConnsPerAddr int `yaml:"maxConnsPerAddr"`
	// Logger receives the server's logs; default slog.Default().
	Logger *slog.Logger `yaml:"-"`
	// OnConnect, if set, is called for each new connection before its first
	// request is read.
	OnConnect func(*Conn) `yaml:"-"`
	// OnClose, if set, is called once per connection after it has closed
	// and its running handlers have returned, for cleanup such as dropping
	// its consumers and held pulls.
	OnClose func(*Conn) `yaml:"-"`
	// Authorize, if set, is called for every request before its handler
	// (and before the check for an unknown code). A nil result lets the
	// handler run; a non-nil one is the response instead, completed as a
	// handler's is (opaque, flags), and the handler does not run. It runs
	// on the request's goroutine, under the same panic recovery, and
	// should not keep req. For codes with a FastHandler it runs on the
	// reader and may see req's extFields unparsed: read them through
	// req's methods or Fields(), not ExtFields. Nil allows everything.
	Authorize func(c *Conn, req *Command) *Command `yaml:"-"`
	// TLS, if set, makes the server speak TLS: a connection must complete
	// a TLS handshake with this config before its first frame, within
	// FrameReadTimeout of being accepted. A peer whose first byte does not
	// start a handshake (a plain RocketMQ client) is closed at once, with
	// a rate-limited log line, unless TLSPermissive is set. Nil serves
	// plain connections only, and closes one that starts a TLS handshake
	// ("TLS client on a plain port"). The config is used as is, so its
	// GetCertificate or GetConfigForClient may swap certificates while
	// the server runs.
	TLS *tls.Config `yaml:"-"`
	// TLSPermissive, with TLS set, serves plain connections on the same
	// port too, telling them apart by their first byte (0x16 starts a TLS
	// handshake record, and no acceptable frame starts with it), as
	// RocketMQ's permissive TLS mode does for migrations.
	TLSPermissive bool `yaml:"-"`
}

// Defaults of ServerOptions fields left zero.
const (
	defaultFrameReadTimeout = 10 * time.Second
	defaultIdleTimeout      = 120 * time.Second
	defaultMaxConns         = 10000
	defaultMaxConnsPerAddr  = 1000
)

// Server accepts connections and serves requests on them with the handlers
// registered by code.
type Server struct {
	opts     ServerOptions
	ep       endpoint
	handlers map[int16]Handler
	fast     []fastEntry // HandleFast, in registration order; a few at most

	quit         chan struct{} // closed by Shutdown; endpoint.drain
	shutdownOnce sync.Once
	stopped      chan struct{} // closed when every accept loop and connection has ended
	wg           sync.WaitGroup

	mu struct {
		sync.Mutex
		serving   bool
		closed    bool
		listeners map[net.Listener]struct{}
		conns     map[*Conn]struct{}
		opening   int            // accepted, still in the TLS handshake
		perAddr   map[string]int // open connections by source IP
	}
}

// NewServer returns a server with opts' defaults filled in. Invalid options
// (negative sizes or timeouts) are a programming error and panic, naming
// every problem.
func NewServer(opts ServerOptions) *Server {
	var problems []string
	if opts.MaxFrameSize < 0 {
		problems = append(problems, fmt.Sprintf("MaxFrameSize %d is negative", opts.MaxFrameSize))
	}
	if opts.MaxInflightPerConn < 0 {
		problems = append(problems, fmt.Sprintf("MaxInflightPerConn %d is negative", opts.MaxInflightPerConn))
	}
	if opts.MaxQueuedBytesPerConn < 0 {
		problems = append(problems, fmt.Sprintf("MaxQueuedBytesPerConn %d is negative", opts.MaxQueuedBytesPerConn))
	}
	if opts.WriteTimeout < 0 {
		problems = append(problems, fmt.Sprintf("WriteTimeout %v is negative", opts.WriteTimeout))
	}
	if opts.FrameReadTimeout < 0 {
		problems = append(problems, fmt.Sprintf("FrameReadTimeout %v is negative", opts.FrameReadTimeout))
	}
	if opts.IdleTimeout < 0 {
		problems = append(problems, fmt.Sprintf("IdleTimeout %v is negative", opts.IdleTimeout))
	}
	if opts.MaxConns < 0 {
		problems = append(problems, fmt.Sprintf("MaxConns %d is negative", opts.MaxConns))
	}
	if opts.MaxConnsPerAddr < 0 {
		problems = append(problems, fmt.Sprintf("MaxConnsPerAddr %d is negative", opts.MaxConnsPerAddr))
	}
	if opts.MaxQueuedBytes < 0 {
		problems = append(problems, fmt.Sprintf("MaxQueuedBytes %d is negative", opts.MaxQueuedBytes))
	}
	if opts.MaxPartialFrameBytes < 0 {
		problems = append(problems, fmt.Sprintf("MaxPartialFrameBytes %d is negative", opts.MaxPartialFrameBytes))
	}
	if opts.MaxFrameSize >= tlsRecordHandshake<<24 {
		problems = append(problems, fmt.Sprintf("MaxFrameSize %d is not below %d: a frame could not be told from a TLS handshake", opts.MaxFrameSize, tlsRecordHandshake<<24))
	}
	if opts.TLSPermissive && opts.TLS == nil {
		problems = append(problems, "TLSPermissive is set without TLS")
	}
	if len(problems) > 0 {
		panic("remoting: invalid ServerOptions: " + strings.Join(problems, "; "))
	}
	if opts.MaxFrameSize == 0 {
		opts.MaxFrameSize = DefaultMaxFrameSize
	}
	if opts.MaxInflightPerConn == 0 {
		opts.MaxInflightPerConn = defaultMaxInflight
	}
	if opts.WriteTimeout == 0 {
		opts.WriteTimeout = defaultWriteTimeout
	}
	if opts.MaxQueuedBytesPerConn == 0 {
		opts.MaxQueuedBytesPerConn = defaultMaxQueuedBytes
	}
	if opts.FrameReadTimeout == 0 {
		opts.FrameReadTimeout = defaultFrameReadTimeout
	}
	if opts.MaxQueuedBytes == 0 {
		opts.MaxQueuedBytes = DefaultMaxQueuedBytes
	}
	if opts.MaxPartialFrameBytes == 0 {
		opts.MaxPartialFrameBytes = DefaultMaxPartialFrameBytes
	}
	if opts.MaxPartialFrameBytes < opts.MaxFrameSize {
		problems = append(problems, fmt.Sprintf("MaxPartialFrameBytes %d is below MaxFrameSize %d: a frame of the largest size could never be read", opts.MaxPartialFrameBytes, opts.MaxFrameSize))
		panic("remoting: invalid ServerOptions: " + strings.Join(problems, "; "))
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = defaultIdleTimeout
	}
	if opts.MaxConns == 0 {
		opts.MaxConns = defaultMaxConns
		if n := fileLimit(); n > 0 && n*3/4 < opts.MaxConns {
			opts.MaxConns = max(n*3/4, 1)
		}
	}
	if opts.MaxConnsPerAddr == 0 {
		opts.MaxConnsPerAddr = defaultMaxConnsPerAddr
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		opts:     opts,
		handlers: make(map[int16]Handler),
		quit:     make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	s.ep = endpoint{
		logger:         opts.Logger,
		maxFrame:       opts.MaxFrameSize,
		maxInflight:    opts.MaxInflightPerConn,
		writeTimeout:   opts.WriteTimeout,
		maxQueued:      opts.MaxQueuedBytesPerConn,
		gateReads:      true,
		frameTimeout:   opts.FrameReadTimeout,
		idleTimeout:    opts.IdleTimeout,
		sniffTLS:       true,
		logRefusals:    true,
		frames:         newFrameBudget(opts.MaxPartialFrameBytes),
		queuedTotal:    new(atomic.Int64),
		maxQueuedTotal: int64(opts.MaxQueuedBytes),
		limits:         newLimitLog(opts.Logger),
		onConnect:      opts.OnConnect,
		onClose:        opts.OnClose,
		drain:          s.quit,
	}
	s.ep.handler = s.dispatch
	s.mu.listeners = make(map[net.Listener]struct{})
	s.mu.conns = make(map[*Conn]struct{})
	s.mu.perAddr = make(map[string]int)
	return s
}

// Handle registers h for requests with the given code. It must be called
// before Serve; registering later, or twice for one code, panics. Requests
// with a code nobody registered are answered with RequestCodeNotSupported.
func (s *Server) Handle(code int16, h Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.serving {
		panic(fmt.Sprintf("remoting: Handle(%s) after Serve", RequestCode(code)))
	}
	if _, dup := s.handlers[code]; dup {
		panic(fmt.Sprintf("remoting: Handle(%s) twice", RequestCode(code)))
	}
	s.handlers[code] = h
}

// HandleFast registers fh as the fast path of code, whose Handler must be
// registered too (it serves what fh declines). Like Handle it must be
// called before Serve, once per code.
func (s *Server) HandleFast(code int16, fh FastHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.serving {
		panic(fmt.Sprintf("remoting: HandleFast(%s) after Serve", RequestCode(code)))
	}
	if s.fastHandler(code) != nil {
		panic(fmt.Sprintf("remoting: HandleFast(%s) twice", RequestCode(code)))
	}
	s.fast = append(s.fast, fastEntry{code, fh})
	s.ep.fast = s.dispatchFast
	s.ep.lazy = s.isFastRequest
}

// fastEntry is one code's FastHandler.
type fastEntry struct {
	code int16
	fh   FastHandler
}

// fastHandler returns code's FastHandler, or nil. s.fast is written only
// before Serve, and holds a few entries (the broker's send codes), which a
// scan finds faster than a map's hashing: the lookup runs twice per
// request.
func (s *Server) fastHandler(code int16) FastHandler {
	for i := range s.fast {
		if s.fast[i].code == code {
			return s.fast[i].fh
		}
	}
	return nil
}

// isFastRequest reports whether c is a request a FastHandler serves.
func (s *Server) isFastRequest(c *Command) bool {
	return !c.IsResponse() && s.fastHandler(c.Code) != nil
}

// dispatchFast offers req to its code's FastHandler, after Authorize: a
// refusal is answered here.
func (s *Server) dispatchFast(c *Conn, req *Command, reply func(*Command)) bool {
	fh := s.fastHandler(req.Code)
	if fh == nil {
		return false
	}
	if s.opts.Authorize != nil {
		if resp := s.opts.Authorize(c, req); resp != nil {
			resp.refusalLogged = true // Authorize logs its own refusals
			reply(resp)
			return true
		}
	}
	return fh(c, req, reply)
}

func (s *Server) dispatch(c *Conn, req *Command) *Command {
	if s.opts.Authorize != nil {
		if resp := s.opts.Authorize(c, req); resp != nil {
			return resp
		}
	}
	h := s.handlers[req.Code]
	var resp *Command
	if h == nil {
		resp = NewResponse(req, RequestCodeNotSupported,
			fmt.Sprintf("request code %d (%s) not supported", req.Code, RequestCode(req.Code)))
	} else {
		resp = h(c, req)
	}
	c.noteRefusal(req, resp)
	return resp
}

// Serve accepts connections on ln and serves them until Shutdown, then
// returns ErrServerClosed. It may run on several listeners at once. It
// returns another error only if ln fails for good.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		_ = ln.Close()
		return ErrServerClosed
	}
	s.mu.serving = true
	s.mu.listeners[ln] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.mu.listeners, ln)
		s.mu.Unlock()
	}()

	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			select {
			case <-s.quit:
				return ErrServerClosed
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Probably out of file descriptors: wait and try again.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.opts.Logger.Error("remoting: accept failed", "addr", ln.Addr().String(), "err", err, "retry_in", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.quit:
				t.Stop()
				return ErrServerClosed
			}
			continue
		}
		backoff = 0
		remote := nc.RemoteAddr()
		host := sourceIP(remote)
		s.mu.Lock()
		if s.mu.closed {
			s.mu.Unlock()
			_ = nc.Close()
			return ErrServerClosed
		}
		total, fromHost := len(s.mu.conns)+s.mu.opening, s.mu.perAddr[host]
		if total >= s.opts.MaxConns || fromHost >= s.opts.MaxConnsPerAddr {
			s.mu.Unlock()
			_ = nc.Close()
			if total >= s.opts.MaxConns {
				s.ep.limits.Warn("conns", "remoting: connection limit reached, refusing new connections",
					"peer", remote.String(), "conns", total, "limit", s.opts.MaxConns)
			} else {
				s.ep.limits.Warn("connsPerAddr", "remoting: per-address connection limit reached, refusing new connections",
					"peer", remote.String(), "conns_from_addr", fromHost, "limit", s.opts.MaxConnsPerAddr)
			}
			continue
		}
		s.mu.perAddr[host]++
		s.wg.Add(1)
		if s.opts.TLS == nil {
			c := newConn(nc, &s.ep)
			s.mu.conns[c] = struct{}{}
			s.mu.Unlock()
			go c.serve(func() { s.connDone(c, host) })
			continue
		}
		s.mu.opening++
		s.mu.Unlock()
		go s.handshakeAndServe(nc, host)
	}
}

// handshakeAndServe serves a connection to a TLS server once accept has
// let it in; it runs on the connection's own goroutine so that a slow
// handshake holds up nobody else.
func (s *Server) handshakeAndServe(nc net.Conn, host string) {
	nc, ok := s.accept(nc)
	s.mu.Lock()
	s.mu.opening--
	if !ok || s.mu.closed {
		s.mu.Unlock()
		if ok {
			_ = nc.Close()
		}
		s.connDone(nil, host)
		return
	}
	c := newConn(nc, &s.ep)
	s.mu.conns[c] = struct{}{}
	s.mu.Unlock()
	c.serve(func() { s.connDone(c, host) })
}

// connDone forgets a connection (nil: one that never got served) when its
// serving goroutine ends.
func (s *Server) connDone(c *Conn, host string) {
	s.mu.Lock()
	if c != nil {
		delete(s.mu.conns, c)
	}
	if s.mu.perAddr[host]--; s.mu.perAddr[host] == 0 {
		delete(s.mu.perAddr, host)
	}
	s.mu.Unlock()
	s.wg.Done()
}

// Stats are a Server's counts of what its connections hold, for metrics.
type Stats struct {
	// PartialFrameBytes is held by frames not yet read whole.
	PartialFrameBytes int64
	// QueuedBytes is response bytes built or set aside and not yet
	// written.
	QueuedBytes int64
	// FramesDropped counts connections closed because their stalled
	// partial frames held the partial-frame budget others needed.
	FramesDropped int64
}

// Stats returns the server's current Stats.
func (s *Server) Stats() Stats {
	return Stats{
		PartialFrameBytes: s.ep.frames.used(),
		QueuedBytes:       s.ep.queuedTotal.Load(),
		FramesDropped:     s.ep.frames.dropped.Load(),
	}
}

// Conns returns the number of open connections, those still in their TLS
// handshake included.
func (s *Server) Conns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.conns) + s.mu.opening
}

// Shutdown stops accepting, stops reading requests, waits for running
// handlers to finish and their responses to be written, and closes every
// connection. If ctx ends first, the remaining connections are closed at
// once and ctx's error is returned; handlers still running then finish on
// their own, their responses dropped. Requests held for a later Reply are
// not waited for. Shutdown may be called more than once; each call waits
// the same way.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		s.mu.Lock()
		s.mu.closed = true
		close(s.quit)
		for ln := range s.mu.listeners {
			_ = ln.Close()
		}
		for c := range s.mu.conns {
			// Wake the reader; it sees quit and drains the connection.
			c.wakeReader()
		}
		s.mu.Unlock()
		go func() {
			s.wg.Wait()
			close(s.stopped)
		}()
	})
	select {
	case <-s.stopped:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.mu.conns {
			c.closeWith(ErrServerClosed)
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}

// sourceIP is the address connections are counted by for MaxConnsPerAddr:
// the IP without the port.
func sourceIP(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	if host, _, err := net.SplitHostPort(a.String()); err == nil {
		return host
	}
	return a.String()
}
