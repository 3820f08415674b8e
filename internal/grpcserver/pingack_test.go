package grpcserver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// frame returns one HTTP/2 frame as the framer writes it.
func frame(t *testing.T, write func(*http2.Framer) error) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := write(http2.NewFramer(&b, nil)); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestOnlyPingAcks(t *testing.T) {
	ack := frame(t, func(f *http2.Framer) error { return f.WritePing(true, [8]byte{1, 2, 3}) })
	ping := frame(t, func(f *http2.Framer) error { return f.WritePing(false, [8]byte{1, 2, 3}) })
	data := frame(t, func(f *http2.Framer) error { return f.WriteData(1, false, []byte("12345678")) })
	settingsAck := frame(t, func(f *http2.Framer) error { return f.WriteSettingsAck() })
	for _, c := range []struct {
		name string
		p    []byte
		want bool
	}{
		{"one ack", ack, true},
		{"two acks", append(append([]byte{}, ack...), ack...), true},
		{"a ping", ping, false},
		{"ack then data", append(append([]byte{}, ack...), data...), false},
		{"data then ack", append(append([]byte{}, data...), ack...), false},
		{"data of a ping's length", data, false},
		{"settings ack", settingsAck, false},
		{"ack cut short", ack[:len(ack)-1], false},
		{"ack and a byte", append(append([]byte{}, ack...), 0), false},
		{"nothing", nil, false},
	} {
		if got := onlyPingAcks(c.p); got != c.want {
			t.Errorf("%s: onlyPingAcks = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestAckHoldConn: an acknowledgement written alone waits, goes out in
// front of the next write in one write, or alone when its hold ends; a
// failed write of the timer's fails every later write.
func TestAckHoldConn(t *testing.T) {
	server, client := net.Pipe()
	defer client.Close()
	c := newAckHoldConn(server, time.Hour)
	ack := frame(t, func(f *http2.Framer) error { return f.WritePing(true, [8]byte{7}) })
	data := frame(t, func(f *http2.Framer) error { return f.WriteData(1, true, []byte("answer")) })

	if n, err := c.Write(ack); n != len(ack) || err != nil {
		t.Fatalf("held write: %d, %v", n, err)
	}
	c.mu.Lock()
	held := len(c.held)
	c.mu.Unlock()
	if held != len(ack) {
		t.Fatalf("%d bytes held after an acknowledgement, want %d", held, len(ack))
	}

	// net.Pipe delivers each Write as the reads of it: one read that
	// returns both shows they left in one write.
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, 256)
		n, _ := client.Read(b)
		got <- b[:n]
	}()
	if n, err := c.Write(data); n != len(data) || err != nil {
		t.Fatalf("write after a held acknowledgement: %d, %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, append(append([]byte{}, ack...), data...)) {
		t.Fatalf("one read got % x, want the acknowledgement and then the data", b)
	}

	// Alone, it leaves when its hold ends.
	c.hold = 10 * time.Millisecond
	if _, err := c.Write(ack); err != nil {
		t.Fatal(err)
	}
	client.SetReadDeadline(time.Now().Add(30 * time.Second))
	b := make([]byte, len(ack))
	if _, err := io.ReadFull(client, b); err != nil || !bytes.Equal(b, ack) {
		t.Fatalf("the held acknowledgement alone: % x, %v", b, err)
	}

	// The timer's write fails: the connection reports it from then on.
	client.Close()
	if _, err := c.Write(ack); err != nil {
		t.Fatalf("a held write fails at once: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.Write(data); err != nil {
			if !errors.Is(err, io.ErrClosedPipe) {
				t.Fatalf("write after the peer closed: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("writes to a closed peer kept succeeding")
		}
	}
}

// writeCounter counts the writes to the connections a listener accepts,
// and among them the writes that carry nothing but PING ACKs.
type writeCounter struct {
	net.Listener
	writes, ackOnly atomic.Int64
}

func (l *writeCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{c, l}, nil
}

type countedConn struct {
	net.Conn
	l *writeCounter
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.l.writes.Add(1)
	if onlyPingAcks(p) {
		c.l.ackOnly.Add(1)
	}
	return c.Conn.Write(p)
}

// slowSends answers each send after a millisecond, as a send that waits
// for its round's fsync does.
type slowSends struct {
	pb.UnimplementedMessagingServiceServer
}

func (slowSends) SendMessage(ctx context.Context, _ *pb.SendMessageRequest) (*pb.SendMessageResponse, error) {
	select {
	case <-time.After(time.Millisecond):
	case <-ctx.Done():
	}
	return &pb.SendMessageResponse{Status: &pb.Status{Code: pb.Code_OK}}, nil
}

// TestPingAcksRideWithAnswers: a grpc-go client making one call at a time
// pings after every answer; the transport alone answers each ping with a
// write of its own, and the held acknowledgements leave with the next
// answers instead. The count that matters is of writes that carry only
// acknowledgements: how grpc-go splits an answer into writes moves with
// the machine's scheduling, that count does not.
func TestPingAcksRideWithAnswers(t *testing.T) {
	for _, c := range []struct {
		name     string
		hold     bool
		min, max float64 // writes of acknowledgements alone, per call
	}{
		{"held", true, 0, 0},
		{"not held", false, 0.5, 1.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			counted := &writeCounter{Listener: ln}
			opt := grpc.Creds(insecure.NewCredentials())
			if c.hold {
				// A hold far beyond a call, so a slow machine cannot
				// make an acknowledgement leave alone.
				opt = grpc.Creds(ackHoldCreds{insecure.NewCredentials(), time.Minute})
			}
			// The broker's fixed windows: no pings of the server's own.
			srv := grpc.NewServer(opt, grpc.InitialWindowSize(streamWindow), grpc.InitialConnWindowSize(connWindow))
			pb.RegisterMessagingServiceServer(srv, slowSends{})
			go srv.Serve(counted)
			defer srv.Stop()

			conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			cl := pb.NewMessagingServiceClient(conn)
			send := func() {
				if _, err := cl.SendMessage(t.Context(), &pb.SendMessageRequest{}); err != nil {
					t.Fatal(err)
				}
			}
			for range 10 { // the connection's setup, and the first pings
				send()
			}
			const calls = 200
			w0, a0 := counted.writes.Load(), counted.ackOnly.Load()
			for range calls {
				send()
			}
			per := float64(counted.writes.Load()-w0) / calls
			acks := float64(counted.ackOnly.Load()-a0) / calls
			t.Logf("%.2f writes per call, %.2f of them acknowledgements alone", per, acks)
			if acks < c.min || acks > c.max {
				t.Errorf("%.2f writes of acknowledgements alone per call, want %.1f to %.1f", acks, c.min, c.max)
			}
		})
	}
}

// collector is the far side of a connection: what was written to it.
type collector struct {
	net.Conn // nil: only Write, SetWriteDeadline and Close are called
	got      bytes.Buffer
	writes   int
}

func (c *collector) Write(p []byte) (int, error) {
	c.writes++
	return c.got.Write(p)
}

func (c *collector) Close() error { return nil }

func (c *collector) SetWriteDeadline(time.Time) error { return nil }

// FuzzAckHoldConn: whatever is written, in whatever pieces, arrives
// whole and in order, and a write that is only PING ACKs is held.
func FuzzAckHoldConn(f *testing.F) {
	var ack [frameHeaderLen + pingLen]byte
	ack[2], ack[3], ack[4] = pingLen, framePing, flagAck
	f.Add(append(append([]byte{17}, ack[:]...), 3, 'a', 'b', 'c'))
	f.Add(append(append([]byte{34}, ack[:]...), ack[:]...))
	f.Add([]byte{0, 1, 2, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		far := &collector{}
		c := newAckHoldConn(far, time.Hour)
		var want bytes.Buffer
		// Each piece is a length byte and that many bytes.
		for len(in) > 0 {
			n := min(int(in[0]), len(in)-1)
			p := in[1 : 1+n]
			in = in[1+n:]
			before, held := far.writes, len(c.held)
			if m, err := c.Write(p); m != len(p) || err != nil {
				t.Fatalf("Write(%d bytes) = %d, %v", len(p), m, err)
			}
			if onlyPingAcks(p) && held+len(p) <= maxHeld && far.writes != before {
				t.Fatalf("a write of PING ACKs alone went out at once")
			}
			want.Write(p)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(far.got.Bytes(), want.Bytes()) {
			t.Fatalf("the far side got % x, want % x", far.got.Bytes(), want.Bytes())
		}
	})
}

// TestAckHoldConnCloseDuringStuckWrite: the transport closes a connection
// to end a write its peer does not read; Close must not wait for that
// write.
func TestAckHoldConnCloseDuringStuckWrite(t *testing.T) {
	server, client := net.Pipe() // a write blocks until the other side reads
	defer client.Close()
	c := newAckHoldConn(server, time.Hour)
	ack := frame(t, func(f *http2.Framer) error { return f.WritePing(true, [8]byte{7}) })
	if _, err := c.Write(ack); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := c.Write([]byte("an answer nobody reads"))
		wrote <- err
	}()
	// The write holds the connection's lock before it blocks in the pipe.
	for c.mu.TryLock() {
		c.mu.Unlock()
		runtime.Gosched()
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close waited for a write its peer never reads")
	}
	if err := <-wrote; !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("the stuck write ended with %v, want io.ErrClosedPipe", err)
	}
}
