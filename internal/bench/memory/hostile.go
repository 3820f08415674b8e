package memory

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/bench"
	"github.com/rmq-go/rmq/internal/bench/child"
)

// Defaults of HostileOptions.
const (
	DefaultStalledFrames   = 40
	DefaultStalledSize     = remoting.DefaultMaxFrameSize - 1
	DefaultUnreadPulls     = 3_000
	DefaultPullSize        = 1 << 20
	DefaultIdleConns       = 5_000
	DefaultTrickleInterval = 100 * time.Millisecond
	// DefaultHold is how long each attack is kept up once in place, while
	// the well-behaved sender goes on.
	DefaultHold = 3 * time.Second
)

// Shapes of the hostile probe's setup.
const (
	hostileGoodTopic = "HostileGood"
	hostileBigTopic  = "HostileBig"
	// hostileBigMessages is how many large messages the unread pulls
	// read, round robin, one per pull.
	hostileBigMessages = 16
	// goodSize is the body of the well-behaved sender's messages.
	goodSize = 1 << 10
	// goodInterval paces the well-behaved sender: one send in flight,
	// the next this long after the last answer.
	goodInterval = 5 * time.Millisecond
	// baselineFor is how long the sender runs alone before each attack.
	baselineFor = 2 * time.Second
	// trickleFrame is the length the trickled frame announces.
	trickleFrame = 1 << 10
	// trickleGiveUp bounds the trickle: a broker that has not closed the
	// connection by then accepted the trickle.
	trickleGiveUp = 60 * time.Second
	// attackWrite bounds each write of an attacker, which a broker that
	// stopped reading holds.
	attackWrite = 30 * time.Second
)

// HostileOptions configures Hostile. The zero value of each field but
// Broker means its default.
type HostileOptions struct {
	// Broker is the path of the broker executable; required.
	Broker string
	// Args are added to the broker's arguments.
	Args []string
	// Env is added to the broker's environment.
	Env []string
	// StalledFrames connections each send StalledSize bytes of a frame
	// that announces one byte more, then stall; default 40 of 16 MiB − 1.
	StalledFrames int
	StalledSize   int
	// UnreadPulls PULL_MESSAGEs of one PullSize message each are sent on
	// one connection that never reads; default 3,000 of 1 MiB.
	UnreadPulls int
	PullSize    int
	// TrickleInterval is the gap between the bytes of the trickled frame;
	// default 100 ms.
	TrickleInterval time.Duration
	// IdleConns connections are opened and left idle; default 5,000.
	IdleConns int
	// Hold is how long each attack stays in place; default DefaultHold.
	Hold time.Duration
	// TempDir is where the broker gets its data directory; default
	// os.TempDir.
	TempDir string
}

// HostileStage is the outcome of one attack.
type HostileStage struct {
	Name string
	// Before is the broker's memory when the attack started; its VmHWM
	// was reset then, so After.HWM is the attack's own peak.
	Before, After bench.Memory
	// BaselineP99 is the well-behaved sender's p99 before the attack, P99
	// during it; Sends counts its sends during the attack, Failed those
	// that failed or timed out. For idle connections "during" starts
	// once every connection is open: opening thousands of them is this
	// process's work on the broker's cores, and not what the stage
	// measures.
	BaselineP99, P99 time.Duration
	Sends, Failed    int
	// Closed is how long the broker took to close the trickled frame's
	// connection (the trickle stage only).
	Closed time.Duration
	Note   string
}

// HostileReport is the outcome of Hostile.
type HostileReport struct {
	Stages []HostileStage
}

// String formats the report as a Markdown table.
func (r HostileReport) String() string {
	rows := [][]string{{"attack", "VmHWM", "RSS before", "sender p99 before", "during", "note"}}
	for _, s := range r.Stages {
		rows = append(rows, []string{s.Name, mib(s.After.HWM), mib(s.Before.RSS),
			s.BaselineP99.Round(10 * time.Microsecond).String(), s.P99.Round(10 * time.Microsecond).String(), s.Note})
	}
	var b strings.Builder
	bench.WriteTable(&b, rows)
	return b.String()
}

func (o HostileOptions) withDefaults() HostileOptions {
	if o.StalledFrames == 0 {
		o.StalledFrames = DefaultStalledFrames
	}
	if o.StalledSize == 0 {
		o.StalledSize = DefaultStalledSize
	}
	if o.UnreadPulls == 0 {
		o.UnreadPulls = DefaultUnreadPulls
	}
	if o.PullSize == 0 {
		o.PullSize = DefaultPullSize
	}
	if o.TrickleInterval == 0 {
		o.TrickleInterval = DefaultTrickleInterval
	}
	if o.IdleConns == 0 {
		o.IdleConns = DefaultIdleConns
	}
	if o.Hold == 0 {
		o.Hold = DefaultHold
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	return o
}

// Hostile runs four attacks, each on a broker of its own started as a
// child process: stalled large frames, pulls whose answers are never
// read, a frame trickled a byte at a time, and many idle connections.
// Once the broker is set up it resets the broker's VmHWM (Linux's
// clear_refs), so the stage's peak is the attack's, and throughout a
// well-behaved sender on a connection of its own sends 1 KiB messages one
// at a time, whose p99 before and during the attack the report gives.
func Hostile(ctx context.Context, opts HostileOptions, log io.Writer) (HostileReport, error) {
	o := opts.withDefaults()
	if log == nil {
		log = io.Discard
	}
	if o.Broker == "" {
		return HostileReport{}, fmt.Errorf("%w: Broker: the broker executable is required", ErrInvalidOptions)
	}
	if err := raiseFileLimit(o.IdleConns + o.StalledFrames + controlFiles); err != nil {
		return HostileReport{}, err
	}
	h := &hostile{o: o, log: log}
	for _, st := range []struct {
		name   string
		big    bool // the stage reads the large messages
		attack func(context.Context, *HostileStage) (func(), error)
	}{
		{fmt.Sprintf("%d stalled frames of %s", o.StalledFrames, size(int64(o.StalledSize))), false, h.stalledFrames},
		{fmt.Sprintf("%s unread pulls of %s", count(int64(o.UnreadPulls)), size(int64(o.PullSize))), true, h.unreadPulls},
		{fmt.Sprintf("a frame trickled a byte per %v", o.TrickleInterval), false, h.trickle},
		{fmt.Sprintf("%s idle connections", count(int64(o.IdleConns))), false, h.idleConns},
	} {
		s, err := h.stage(ctx, st.name, st.big, st.attack)
		if err != nil {
			return h.rep, fmt.Errorf("%s: %w", st.name, err)
		}
		h.rep.Stages = append(h.rep.Stages, s)
		fmt.Fprintf(log, "%-40s VmHWM %s (RSS before %s), sender p99 %v → %v, %d sends, %d failed %s\n",
			s.Name, mib(s.After.HWM), mib(s.Before.RSS), s.BaselineP99, s.P99, s.Sends, s.Failed, s.Note)
	}
	return h.rep, nil
}

// stage runs one attack on a broker of its own, started on a fresh
// directory, so that what one attack leaves in the broker's heap does not
// count toward the next one's peak.
func (h *hostile) stage(ctx context.Context, name string, big bool, attack func(context.Context, *HostileStage) (func(), error)) (HostileStage, error) {
	o := h.o
	s := HostileStage{Name: name}
	dir, err := os.MkdirTemp(o.TempDir, "rmq-hostile-*")
	if err != nil {
		return s, err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "broker.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, "remoting:\n  maxConns: %d\n", o.IdleConns+controlFiles), 0o600); err != nil {
		return s, err
	}
	argv := append([]string{o.Broker, "--config", cfg, "--data-dir", filepath.Join(dir, "data"),
		"--listen", "127.0.0.1:0", "--namesrv-listen", "", "--http-listen", "", "--grpc-listen", ""}, o.Args...)
	b, err := child.Start(ctx, child.Options{Name: "broker", Argv: argv, Dir: dir, Env: o.Env, Ready: child.BrokerReady})
	if err != nil {
		return s, err
	}
	defer b.Stop()
	h.b = b
	ctl, err := dial(ctx, b.Addr(), nil)
	if err != nil {
		return s, err
	}
	defer ctl.close()
	for _, t := range []string{hostileGoodTopic, hostileBigTopic} {
		if err := ctl.createTopic(t, 1); err != nil {
			return s, err
		}
	}
	if big {
		body := make([]byte, o.PullSize)
		for i := range hostileBigMessages {
			if _, err := ctl.callBody(remoting.SendMessage, sendHeader(hostileBigTopic), body); err != nil {
				return s, fmt.Errorf("large message %d: %w", i, err)
			}
		}
	}
	good, err := newGoodSender(ctx, b.Addr())
	if err != nil {
		return s, err
	}
	defer good.stop()
	h.good = good
	s.BaselineP99, _, _ = good.measure(ctx, baselineFor)
	if err := resetPeak(b.PID()); err != nil {
		return s, err
	}
	if s.Before, err = bench.ProcessMemory(b.PID()); err != nil {
		return s, err
	}
	good.restart()
	end, err := attack(ctx, &s)
	if end != nil {
		defer end()
	}
	if err != nil {
		return s, err
	}
	s.P99, s.Sends, s.Failed = good.result()
	if s.After, err = bench.ProcessMemory(b.PID()); err != nil {
		return s, err
	}
	if st, exited := b.Exited(); exited {
		return s, fmt.Errorf("%w: the broker exited (%v): %s", ErrProbe, st, b.LogTail())
	}
	return s, nil
}

type hostile struct {
	o HostileOptions
	b *child.Process // the broker of the stage running
	// good is the stage's well-behaved sender.
	good *goodSender
	log  io.Writer
	rep  HostileReport
}

// resetPeak resets pid's VmHWM to its current RSS (clear_refs, Linux 4.0
// and later).
func resetPeak(pid int) error {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return fmt.Errorf("%w: resetting the broker's peak memory: %v", ErrProbe, err)
	}
	return nil
}

// attackers runs fn for n connections from the loopback source addresses,
// dialers at a time, and returns them with what closes them all.
func (h *hostile) attackers(ctx context.Context, n int, fn func(i int, nc net.Conn) error) ([]net.Conn, func(), error) {
	conns := make([]net.Conn, n)
	closeAll := func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for range min(dialers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				d := net.Dialer{Timeout: callTimeout, LocalAddr: sourceAddr(i)}
				nc, err := d.DialContext(ctx, "tcp", h.b.Addr())
				if err == nil {
					mu.Lock()
					conns[i] = nc
					mu.Unlock()
					err = fn(i, nc)
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("%w: connection %d: %v", ErrProbe, i+1, err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return conns, closeAll, first
}

// stalledFrames: each connection announces a frame of StalledSize+1 bytes,
// sends StalledSize of them and stalls. A broker that closes some of
// them (its budget for partial frames) fails their writes, which is
// counted, not an error.
func (h *hostile) stalledFrames(ctx context.Context, s *HostileStage) (func(), error) {
	var dropped atomic.Int64
	payload := make([]byte, 4+h.o.StalledSize)
	binary.BigEndian.PutUint32(payload, uint32(h.o.StalledSize+1))
	_, end, err := h.attackers(ctx, h.o.StalledFrames, func(i int, nc net.Conn) error {
		nc.SetWriteDeadline(time.Now().Add(attackWrite))
		if _, err := nc.Write(payload); err != nil {
			dropped.Add(1)
		}
		return nil
	})
	if err == nil {
		err = sleep(ctx, h.o.Hold)
	}
	s.Note = fmt.Sprintf("%d of %d connections closed by the broker while sending", dropped.Load(), h.o.StalledFrames)
	return end, err
}

// unreadPulls: one connection sends UnreadPulls pulls of one large
// message each and reads nothing.
func (h *hostile) unreadPulls(ctx context.Context, s *HostileStage) (func(), error) {
	var sent int
	_, end, err := h.attackers(ctx, 1, func(_ int, nc net.Conn) error {
		c := &probeConn{nc: nc}
		for i := range h.o.UnreadPulls {
			hdr := pullHeader(probeGroup, hostileBigTopic, 0, int64(i%hostileBigMessages))
			hdr["sysFlag"], hdr["maxMsgNums"] = "4", "1" // answered at once, one message
			if err := c.send(remoting.PullMessage, hdr); err != nil {
				// The broker stopped reading the connection: the
				// backpressure asked for.
				return nil
			}
			sent++
		}
		return nil
	})
	if err == nil {
		err = sleep(ctx, h.o.Hold)
	}
	s.Note = fmt.Sprintf("%s of %s pulls written before the broker stopped reading", count(int64(sent)), count(int64(h.o.UnreadPulls)))
	return end, err
}

// trickle: one connection announces a small frame and sends it a byte per
// TrickleInterval, until the broker closes it.
func (h *hostile) trickle(ctx context.Context, s *HostileStage) (func(), error) {
	_, end, err := h.attackers(ctx, 1, func(_ int, nc net.Conn) error {
		frame := make([]byte, 4+trickleFrame)
		binary.BigEndian.PutUint32(frame, trickleFrame)
		t0 := time.Now()
		for i := 0; i < len(frame); i++ {
			nc.SetWriteDeadline(time.Now().Add(callTimeout))
			if _, err := nc.Write(frame[i : i+1]); err != nil {
				break
			}
			// A closed connection shows first as a read that ends.
			nc.SetReadDeadline(time.Now().Add(h.o.TrickleInterval))
			var b [1]byte
			if _, err := nc.Read(b[:]); err != nil && !isTimeout(err) {
				break
			}
			if time.Since(t0) > trickleGiveUp {
				return fmt.Errorf("the broker still reads the trickled frame after %v", trickleGiveUp)
			}
		}
		s.Closed = time.Since(t0)
		return nil
	})
	s.Note = fmt.Sprintf("closed after %v", s.Closed.Round(100*time.Millisecond))
	return end, err
}

// idleConns: IdleConns connections, each answered one GET_MAX_OFFSET,
// then left idle; the sender's p99 is taken while they are.
func (h *hostile) idleConns(ctx context.Context, s *HostileStage) (func(), error) {
	_, end, err := h.attackers(ctx, h.o.IdleConns, func(i int, nc net.Conn) error {
		c := &probeConn{nc: nc, br: newProbeReader(nc)}
		_, err := c.maxOffset(hostileGoodTopic, 0)
		c.hold()
		return err
	})
	if err == nil {
		h.good.restart()
		err = sleep(ctx, h.o.Hold)
	}
	return end, err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sendHeader is a SEND_MESSAGE header for one message to queue 0 of topic.
func sendHeader(topic string) map[string]string {
	return map[string]string{
		"producerGroup": "hostile-probe", "topic": topic, "defaultTopic": remoting.AutoCreateTopicKey,
		"defaultTopicQueueNums": "4", "queueId": "0", "sysFlag": "0",
		"bornTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10), "flag": "0",
		"properties": "", "reconsumeTimes": "0", "unitMode": "false", "batch": "false",
	}
}

// goodSender sends 1 KiB messages one at a time on a connection of its
// own and records their latencies.
type goodSender struct {
	quit chan struct{}
	done chan struct{}
	mu   struct {
		sync.Mutex
		hist   bench.Histogram
		failed int
	}
}

func newGoodSender(ctx context.Context, addr string) (*goodSender, error) {
	c, err := dial(ctx, addr, nil)
	if err != nil {
		return nil, err
	}
	g := &goodSender{quit: make(chan struct{}), done: make(chan struct{})}
	body := make([]byte, goodSize)
	go func() {
		defer close(g.done)
		defer c.close()
		tick := time.NewTicker(goodInterval)
		defer tick.Stop()
		for {
			select {
			case <-g.quit:
				return
			case <-tick.C:
			}
			t0 := time.Now()
			_, err := c.callBody(remoting.SendMessage, sendHeader(hostileGoodTopic), body)
			d := time.Since(t0)
			g.mu.Lock()
			if err != nil {
				g.mu.failed++
			} else {
				g.mu.hist.Record(d)
			}
			g.mu.Unlock()
			if err != nil && !errors.Is(err, ErrProbe) {
				// The connection itself failed: dial again.
				c.close()
				if c, err = dial(ctx, addr, nil); err != nil {
					return
				}
			}
		}
	}()
	return g, nil
}

// restart clears what the sender recorded.
func (g *goodSender) restart() {
	g.mu.Lock()
	g.mu.hist.Reset()
	g.mu.failed = 0
	g.mu.Unlock()
}

// result is the p99 and counts since the last restart.
func (g *goodSender) result() (p99 time.Duration, sends, failed int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.hist.Quantile(0.99), int(g.mu.hist.Count()) + g.mu.failed, g.mu.failed
}

// measure records for d and returns the result.
func (g *goodSender) measure(ctx context.Context, d time.Duration) (time.Duration, int, int) {
	g.restart()
	_ = sleep(ctx, d)
	return g.result()
}

func (g *goodSender) stop() {
	close(g.quit)
	<-g.done
}
