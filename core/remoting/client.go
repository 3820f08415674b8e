package remoting

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"
)

// ClientOptions configures a Client. The zero value of each field means its
// default.
type ClientOptions struct {
	// DialTimeout bounds connecting to an address; default 3 s.
	DialTimeout time.Duration
	// MaxFrameSize is the largest frame accepted from a server, counted
	// after the length prefix; default DefaultMaxFrameSize (16 MiB).
	MaxFrameSize int
	// Logger receives the client's logs; default slog.Default().
	Logger *slog.Logger
	// OnRequest serves requests that servers send to this client, such as
	// CHECK_TRANSACTION_STATE and NOTIFY_CONSUMER_IDS_CHANGED; its result is
	// handled as a Server handler's. Nil ignores them.
	OnRequest Handler
	// TLS, if set, makes every connection TLS with this config; the
	// handshake is part of the dial, bounded by DialTimeout. An empty
	// ServerName is taken from the address dialled. Nil dials plain.
	TLS *tls.Config
	// Dial, if set, opens the connections in place of a TCP dial, such as
	// an in-process one; TLS, if set, runs over what it returns. Its
	// context ends at DialTimeout.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
}

// defaultDialTimeout is ClientOptions.DialTimeout's default.
const defaultDialTimeout = 3 * time.Second

// Client sends requests to servers by address. It keeps one connection per
// address string, dialled on first use and shared by all calls to it; many
// calls may be in flight on one connection at once. When a connection is
// lost, the calls pending on it fail with ErrClosed and the next call dials
// again.
type Client struct {
	opts ClientOptions
	ep   endpoint
	wg   sync.WaitGroup // dial-and-serve goroutines, one per connection

	mu struct {
		sync.Mutex
		closed bool
		conns  map[string]*clientConn
	}
}

// clientConn is the connection for one address, or the dial under way.
type clientConn struct {
	ready chan struct{} // closed when the dial has finished
	conn  *Conn         // set before ready is closed if the dial worked
	err   error         // set before ready is closed if it failed
}

// NewClient returns a client with opts' defaults filled in. Negative sizes
// or timeouts are a programming error and panic.
func NewClient(opts ClientOptions) *Client {
	var problems []string
	if opts.DialTimeout < 0 {
		problems = append(problems, fmt.Sprintf("DialTimeout %v is negative", opts.DialTimeout))
	}
	if opts.MaxFrameSize < 0 {
		problems = append(problems, fmt.Sprintf("MaxFrameSize %d is negative", opts.MaxFrameSize))
	}
	if len(problems) > 0 {
		panic("remoting: invalid ClientOptions: " + strings.Join(problems, "; "))
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = defaultDialTimeout
	}
	if opts.MaxFrameSize == 0 {
		opts.MaxFrameSize = DefaultMaxFrameSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	cl := &Client{opts: opts}
	cl.ep = endpoint{
		handler:      opts.OnRequest,
		logger:       opts.Logger,
		maxFrame:     opts.MaxFrameSize,
		maxInflight:  defaultMaxInflight,
		writeTimeout: defaultWriteTimeout,
		maxQueued:    defaultMaxQueuedBytes,
		limits:       newLimitLog(opts.Logger),
		lazy:         (*Command).IsResponse,
	}
	cl.mu.conns = make(map[string]*clientConn)
	return cl
}

// Invoke sends req to addr and waits for its response, until ctx is done or
// the connection is lost. The request goes out in req.SerializeType with an
// opaque of its own; req is not modified.
func (cl *Client) Invoke(ctx context.Context, addr string, req *Command) (*Command, error) {
	c, err := cl.conn(ctx, addr)
	if err != nil {
		return nil, err
	}
	return c.call(ctx, req, req.SerializeType)
}

// InvokeAsync sends req to addr and returns once it is queued for writing,
// without waiting for the response: done is then called exactly once, with
// the response, or with an error when none came within timeout (wrapping
// context.DeadlineExceeded), ctx ended first (wrapping its error) or the
// connection was lost first (wrapping ErrClosed). When InvokeAsync returns
// an error, done is not called. A ctx that can end costs a
// context.AfterFunc per call; a caller that keeps many requests in flight
// and ends them otherwise passes one that cannot (context.WithoutCancel).
//
// done runs on the connection's reader goroutine, a timer's or the one
// closing the connection, so it must be quick and must not block: a call
// that needs more (another request, say) hands its work to a goroutine of
// its own. req is encoded before InvokeAsync returns and may be reused then;
// its Body is kept until written unless ReleaseBody says otherwise.
// A timeout of zero or less is a programming error and panics.
func (cl *Client) InvokeAsync(ctx context.Context, addr string, req *Command, timeout time.Duration, done func(*Command, error)) error {
	if timeout <= 0 {
		panic(fmt.Sprintf("remoting: InvokeAsync timeout %v is not positive", timeout))
	}
	c, err := cl.conn(ctx, addr)
	if err != nil {
		return err
	}
	return c.callAsync(ctx, req, req.SerializeType, timeout, done)
}

// InvokeOneway sends req to addr as a oneway request (flag bit 1) and
// returns once it is queued for writing.
func (cl *Client) InvokeOneway(ctx context.Context, addr string, req *Command) error {
	c, err := cl.conn(ctx, addr)
	if err != nil {
		return err
	}
	return c.oneway(ctx, req, req.SerializeType)
}

// Connected reports whether the client holds a live connection to addr,
// so that a call to addr now would not wait for a dial.
func (cl *Client) Connected(addr string) bool {
	cl.mu.Lock()
	e := cl.mu.conns[addr]
	cl.mu.Unlock()
	if e == nil {
		return false
	}
	select {
	case <-e.ready:
	default:
		return false // being dialled
	}
	if e.conn == nil {
		return false
	}
	select {
	case <-e.conn.Done():
		return false
	default:
		return true
	}
}

// conn returns the live connection for addr, dialling if there is none.
func (cl *Client) conn(ctx context.Context, addr string) (*Conn, error) {
	for {
		cl.mu.Lock()
		if cl.mu.closed {
			cl.mu.Unlock()
			return nil, ErrClientClosed
		}
		e := cl.mu.conns[addr]
		if e == nil {
			e = &clientConn{ready: make(chan struct{})}
			cl.mu.conns[addr] = e
			cl.wg.Add(1)
			go cl.dialAndServe(addr, e)
		}
		cl.mu.Unlock()

		select {
		case <-e.ready:
		case <-ctx.Done():
			return nil, fmt.Errorf("remoting: connecting to %s: %w", addr, ctx.Err())
		}
		if e.err != nil {
			return nil, e.err
		}
		select {
		case <-e.conn.Done():
			// Lost; its goroutine is removing it. Dial a new one.
			cl.forget(addr, e)
		default:
			return e.conn, nil
		}
	}
}

// forget removes e from the table if it is still addr's entry.
func (cl *Client) forget(addr string, e *clientConn) {
	cl.mu.Lock()
	if cl.mu.conns[addr] == e {
		delete(cl.mu.conns, addr)
	}
	cl.mu.Unlock()
}

// dial connects to addr, over TLS if the options say so.
func (cl *Client) dial(ctx context.Context, addr string) (net.Conn, error) {
	if cl.opts.Dial == nil {
		if cl.opts.TLS != nil {
			td := tls.Dialer{Config: cl.opts.TLS}
			return td.DialContext(ctx, "tcp", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	nc, err := cl.opts.Dial(ctx, addr)
	if err != nil || cl.opts.TLS == nil {
		return nc, err
	}
	cfg := cl.opts.TLS
	if cfg.ServerName == "" {
		// As tls.Dialer does: the host dialled is the name to verify.
		cfg = cfg.Clone()
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		return nil, err
	}
	return tc, nil
}

// dialAndServe connects to addr for e and then owns the connection until it
// closes. Dialling is bounded by DialTimeout rather than by any one caller's
// context, since every caller for addr waits on it.
func (cl *Client) dialAndServe(addr string, e *clientConn) {
	defer cl.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), cl.opts.DialTimeout)
	nc, err := cl.dial(ctx, addr)
	cancel()
	cl.mu.Lock()
	if err == nil && cl.mu.closed {
		_ = nc.Close()
		err = ErrClientClosed
	}
	if err != nil {
		e.err = fmt.Errorf("remoting: dial %s: %w", addr, err)
		if cl.mu.conns[addr] == e {
			delete(cl.mu.conns, addr)
		}
		cl.mu.Unlock()
		close(e.ready)
		return
	}
	e.conn = newConn(nc, &cl.ep)
	cl.mu.Unlock()
	close(e.ready)
	e.conn.serve(func() { cl.forget(addr, e) })
}

// Close closes every connection, failing the calls pending on them, and
// waits for the client's goroutines to end (a dial under way may take up to
// DialTimeout). Later calls return ErrClientClosed. Close may be called more
// than once, since several owners may share a client at shutdown.
func (cl *Client) Close() error {
	cl.mu.Lock()
	cl.mu.closed = true
	cl.mu.Unlock()
	for _, c := range cl.dialled() {
		c.closeWith(ErrClientClosed)
	}
	cl.wg.Wait()
	return nil
}

// dialled returns the connections whose dial has succeeded, live or not.
func (cl *Client) dialled() []*Conn {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var conns []*Conn
	for _, e := range cl.mu.conns {
		if e.conn != nil {
			conns = append(conns, e.conn)
		}
	}
	return conns
}
