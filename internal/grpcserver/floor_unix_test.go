//go:build unix

package grpcserver_test

import (
	"bufio"
	"context"
	"crypto/md5"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/bench"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// The transport floor: what each protocol's server costs per send when
// the send does nothing, and what a gRPC server costs per message it
// hands a POP consumer. BenchmarkTransportFloor runs a server that
// answers every send at once, with no store behind it, in a child
// process (this test binary again), loads it from this process with 64
// connections of one send in flight each, as `broker bench protocols`
// loads a broker, and reports the child's CPU per send. What a broker
// spends beyond it is its own work, the same over both protocols, so the
// difference between the two floors is what gRPC adds to each send.
//
// BenchmarkPOPFloor does the same for POP consumption as `broker bench
// protocols` runs it: receivers that each loop a ReceiveMessage of a batch
// of 32 and one AckMessage of everything received, against a server that
// streams the same 32 prebuilt messages every time and answers every ack
// OK. Its rate bounds what any broker on grpc-go can reach with this
// load on this machine.

// floorServeEnv, set in a child's environment, makes the test binary
// serve a do-nothing server of that protocol instead of running tests.
// floorProfileEnv, set in the benchmark's, names a file the child writes
// its CPU profile to (the protocol's name is appended).
const (
	floorServeEnv   = "RMQ_TRANSPORT_FLOOR_SERVE"
	floorProfileEnv = "RMQ_TRANSPORT_FLOOR_CPUPROFILE"
)

func TestMain(m *testing.M) {
	if proto := os.Getenv(floorServeEnv); proto != "" {
		if err := serveFloor(proto); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveFloor serves proto on a loopback port, prints its address, and
// returns when stdin closes.
func serveFloor(proto string) error {
	if loops, ok := strings.CutPrefix(proto, "epoll"); ok {
		n, _ := strconv.Atoi(loops)
		addr, err := serveEpollFloor(n)
		if err != nil {
			return err
		}
		fmt.Println(addr)
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	switch proto {
	case "grpc":
		// The options that shape the transport's work are the broker's
		// (server.go): fixed flow-control windows.
		s := grpc.NewServer(grpc.InitialWindowSize(256<<10), grpc.InitialConnWindowSize(1<<20))
		pb.RegisterMessagingServiceServer(s, floorGRPC{batch: floorBatch()})
		go s.Serve(ln)
	case "remoting":
		s := remoting.NewServer(remoting.ServerOptions{})
		var off atomic.Int64
		// Sends are answered on the connection's reader, as the broker's
		// are (a FastHandler): the cheapest path the server has.
		send := func(_ *remoting.Conn, req *remoting.Command, reply func(*remoting.Command)) bool {
			resp := remoting.NewResponse(req, remoting.Success, "")
			resp.SetFields("msgId", "7F00000100002A9F0000000000000000", "queueId", "0", "queueOffset", strconv.FormatInt(off.Add(1), 10))
			reply(resp)
			return true
		}
		s.HandleFast(remoting.SendMessageV2, send)
		s.HandleFast(remoting.SendMessage, send)
		// What `broker bench produce` asks before it sends.
		s.Handle(remoting.UpdateAndCreateTopic, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
			return remoting.NewResponse(req, remoting.Success, "")
		})
		s.Handle(remoting.GetMaxOffset, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
			resp := remoting.NewResponse(req, remoting.Success, "")
			resp.SetFields("offset", "0")
			return resp
		})
		go s.Serve(ln)
	default:
		return fmt.Errorf("unknown protocol %q", proto)
	}
	if path := os.Getenv(floorProfileEnv); path != "" {
		f, err := os.Create(path + "." + proto)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	fmt.Println(ln.Addr())
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return nil
}

// floorGRPC answers every send and ack OK at once, and streams batch to
// every receive.
type floorGRPC struct {
	pb.UnimplementedMessagingServiceServer
	batch []*pb.ReceiveMessageResponse
}

// floorPOPBatch is the messages of one receive, as `broker bench
// protocols` asks for them.
const floorPOPBatch = 32

// floorBatch builds one receive's messages with the system properties a
// broker fills in (receive.go), each with a 1 KiB body.
func floorBatch() []*pb.ReceiveMessageResponse {
	body := make([]byte, 1024)
	sum := md5.Sum(body)
	batch := make([]*pb.ReceiveMessageResponse, floorPOPBatch)
	for i := range batch {
		id, handle, tag := fmt.Sprintf("7F00000100002A9F%016X", i), fmt.Sprintf("%096x", i), "t"
		queue, offset, attempt := int32(i%8), int64(i), int32(1)
		batch[i] = &pb.ReceiveMessageResponse{Content: &pb.ReceiveMessageResponse_Message{Message: &pb.Message{
			Topic: res("BenchTopic"), Body: body,
			SystemProperties: &pb.SystemProperties{
				MessageId: id, Tag: &tag,
				BodyDigest:   &pb.Digest{Type: pb.DigestType_MD5, Checksum: fmt.Sprintf("%X", sum)},
				BodyEncoding: pb.Encoding_IDENTITY, MessageType: pb.MessageType_NORMAL,
				BornTimestamp: timestamppb.Now(), BornHost: "127.0.0.1", StoreTimestamp: timestamppb.Now(), StoreHost: "127.0.0.1:10911",
				ReceiptHandle: &handle, QueueId: queue, QueueOffset: &offset,
				InvisibleDuration: durationpb.New(30 * time.Second), DeliveryAttempt: &attempt,
			},
		}}}
	}
	return batch
}

func (f floorGRPC) ReceiveMessage(_ *pb.ReceiveMessageRequest, stream pb.MessagingService_ReceiveMessageServer) error {
	if err := stream.Send(&pb.ReceiveMessageResponse{Content: &pb.ReceiveMessageResponse_Status{Status: &pb.Status{Code: pb.Code_OK, Message: "OK"}}}); err != nil {
		return err
	}
	for _, m := range f.batch {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return stream.Send(&pb.ReceiveMessageResponse{Content: &pb.ReceiveMessageResponse_DeliveryTimestamp{DeliveryTimestamp: timestamppb.Now()}})
}

func (floorGRPC) AckMessage(_ context.Context, req *pb.AckMessageRequest) (*pb.AckMessageResponse, error) {
	entries := make([]*pb.AckMessageResultEntry, len(req.GetEntries()))
	for i, e := range req.GetEntries() {
		entries[i] = &pb.AckMessageResultEntry{MessageId: e.GetMessageId(), ReceiptHandle: e.GetReceiptHandle(), Status: &pb.Status{Code: pb.Code_OK, Message: "OK"}}
	}
	return &pb.AckMessageResponse{Status: &pb.Status{Code: pb.Code_OK, Message: "OK"}, Entries: entries}, nil
}

var floorOffset atomic.Int64

func (floorGRPC) SendMessage(_ context.Context, req *pb.SendMessageRequest) (*pb.SendMessageResponse, error) {
	entries := make([]*pb.SendResultEntry, len(req.GetMessages()))
	for i, m := range req.GetMessages() {
		entries[i] = &pb.SendResultEntry{Status: &pb.Status{Code: pb.Code_OK, Message: "OK"},
			MessageId: m.GetSystemProperties().GetMessageId(), Offset: floorOffset.Add(1)}
	}
	return &pb.SendMessageResponse{Status: &pb.Status{Code: pb.Code_OK, Message: "OK"}, Entries: entries}, nil
}

// startFloor starts a child serving proto and returns its address and
// pid; the child ends with the benchmark.
func startFloor(b *testing.B, proto string) (string, int) {
	b.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), floorServeEnv+"="+proto)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("floor server: %v", err)
		}
	})
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("floor server's address: %v", err)
	}
	return strings.TrimSpace(addr), cmd.Process.Pid
}

// BenchmarkLoadFloor runs `broker bench produce`'s own load, the load
// generator of `bench compare`'s pairings 1 (64 connections, one send in
// flight each) and 2 (4 connections, 128 each), against the do-nothing
// remoting server: what the generator and a server that does nothing
// with a send reach together on this machine. No broker, which stores
// what it is sent, goes faster beside the same generator.
//
// RMQ_FLOOR_SERVER=epoll1 (or epoll2) serves the same answers from one
// (two) level-triggered epoll loops of the server's own instead of Go's
// net package (serveEpollFloor): what a transport that never reads an
// empty socket and wakes no goroutine per request would save.
func BenchmarkLoadFloor(b *testing.B) {
	server := "remoting"
	if s := os.Getenv("RMQ_FLOOR_SERVER"); s != "" {
		server = s
	}
	for _, c := range []struct{ conns, inFlight int }{{64, 1}, {4, 128}} {
		b.Run(fmt.Sprintf("%dx%d", c.conns, c.inFlight), func(b *testing.B) {
			addr, pid := startFloor(b, server)
			cpu0, self0 := cpuTimes(b, pid)
			sum, err := bench.Produce(context.Background(), bench.Options{Broker: addr, Conns: c.conns, InFlight: c.inFlight, Count: int64(b.N)}, io.Discard)
			if err != nil {
				b.Fatal(err)
			}
			if sum.Errors != 0 {
				b.Fatalf("%d errors: %q", sum.Errors, sum.ErrorSamples)
			}
			cpu1, self1 := cpuTimes(b, pid)
			msgs := float64(sum.Messages)
			b.ReportMetric(sum.MsgsPerSec, "msgs/s")
			b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/msgs, "server-cpu-ns/msg")
			b.ReportMetric(float64((self1-self0).Nanoseconds())/msgs, "load-cpu-ns/msg")
		})
	}
}

// floorConns is the connections, one send in flight each, as load 1 of
// `broker bench protocols`.
const floorConns = 64

func BenchmarkTransportFloor(b *testing.B) {
	body := make([]byte, 1024)
	b.Run("remoting", func(b *testing.B) {
		addr, pid := startFloor(b, "remoting")
		props := "UNIQ_KEY\x01" + "7F000001000000000000000000000000" + "\x02WAIT\x01true\x02TAGS\x01t"
		runFloor(b, pid, floorConns, 1, func() (func(i int) error, func()) {
			cl := remoting.NewClient(remoting.ClientOptions{})
			return func(i int) error {
				req := remoting.NewRequest(remoting.SendMessageV2, map[string]string{
					"a": "bench", "b": "BenchTopic", "c": "TBW102", "d": "4", "e": strconv.Itoa(i % 8), "f": "0",
					"g": strconv.FormatInt(time.Now().UnixMilli(), 10), "h": "0", "i": props, "j": "0", "k": "false", "m": "false", "n": "bench",
				}, body)
				resp, err := cl.Invoke(context.Background(), addr, req)
				if err == nil && resp.Code != remoting.Success {
					err = fmt.Errorf("send answered %d %s", resp.Code, resp.Remark)
				}
				return err
			}, func() { cl.Close() }
		})
	})
	b.Run("grpc", func(b *testing.B) {
		addr, pid := startFloor(b, "grpc")
		runFloor(b, pid, floorConns, 1, func() (func(i int) error, func()) {
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			cl := pb.NewMessagingServiceClient(conn)
			return func(i int) error {
				r, err := cl.SendMessage(context.Background(), &pb.SendMessageRequest{Messages: []*pb.Message{msg("BenchTopic", strconv.Itoa(i), "t", string(body))}})
				if err == nil && r.GetStatus().GetCode() != pb.Code_OK {
					err = fmt.Errorf("send answered %v", r.GetStatus())
				}
				return err
			}, func() { conn.Close() }
		})
	})
}

// floorReceivers is the POP receivers, as `broker bench protocols` runs
// them.
const floorReceivers = 8

func BenchmarkPOPFloor(b *testing.B) {
	addr, pid := startFloor(b, "grpc")
	runFloor(b, pid, floorReceivers, floorPOPBatch, func() (func(i int) error, func()) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		cl := pb.NewMessagingServiceClient(conn)
		recv := &pb.ReceiveMessageRequest{
			Group: res("bench"), MessageQueue: &pb.MessageQueue{Topic: res("BenchTopic")},
			FilterExpression:  &pb.FilterExpression{Type: pb.FilterType_TAG, Expression: "*"},
			BatchSize:         floorPOPBatch,
			InvisibleDuration: durationpb.New(30 * time.Second), LongPollingTimeout: durationpb.New(0),
		}
		return func(int) error {
			stream, err := cl.ReceiveMessage(context.Background(), recv)
			if err != nil {
				return err
			}
			ack := &pb.AckMessageRequest{Group: recv.Group, Topic: recv.MessageQueue.Topic}
			for {
				r, err := stream.Recv()
				if err == io.EOF {
					break
				}
				if err != nil {
					return err
				}
				if m := r.GetMessage(); m != nil {
					sp := m.GetSystemProperties()
					ack.Entries = append(ack.Entries, &pb.AckMessageEntry{MessageId: sp.GetMessageId(), ReceiptHandle: sp.GetReceiptHandle()})
				}
			}
			if len(ack.Entries) != floorPOPBatch {
				return fmt.Errorf("received %d messages, want %d", len(ack.Entries), floorPOPBatch)
			}
			a, err := cl.AckMessage(context.Background(), ack)
			if err == nil && a.GetStatus().GetCode() != pb.Code_OK {
				err = fmt.Errorf("ack answered %v", a.GetStatus())
			}
			return err
		}, func() { conn.Close() }
	})
}

// runFloor makes calls over conns connections that dial makes, one in
// flight on each, until b.N messages have gone, perCall in each call. It
// reports the messages per second, and the server's and this process's
// (the load's) CPU per message.
func runFloor(b *testing.B, pid, conns, perCall int, dial func() (call func(i int) error, close func())) {
	sends := make([]func(int) error, conns)
	for i := range sends {
		send, closeConn := dial()
		b.Cleanup(closeConn)
		if err := send(i); err != nil { // connected, and the first call's setup done
			b.Fatal(err)
		}
		sends[i] = send
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	calls := (int64(b.N) + int64(perCall) - 1) / int64(perCall)
	cpu0, self0 := cpuTimes(b, pid)
	r0, w0 := syscalls(b, pid)
	t0 := time.Now()
	b.ResetTimer()
	for _, send := range sends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= calls; i = next.Add(1) {
				if err := send(int(i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	cpu1, self1 := cpuTimes(b, pid)
	r1, w1 := syscalls(b, pid)
	msgs := float64(calls * int64(perCall))
	b.ReportMetric(msgs/el.Seconds(), "msgs/s")
	b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/msgs, "server-cpu-ns/msg")
	b.ReportMetric(float64((self1-self0).Nanoseconds())/msgs, "load-cpu-ns/msg")
	b.ReportMetric(float64(r1-r0)/msgs, "server-reads/msg")
	b.ReportMetric(float64(w1-w0)/msgs, "server-writes/msg")
}

// cpuTimes returns the CPU time pid and this process have used.
func cpuTimes(b *testing.B, pid int) (server, self time.Duration) {
	b.Helper()
	server, err := bench.ProcessCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	if self, err = bench.ProcessCPU(os.Getpid()); err != nil {
		b.Fatal(err)
	}
	return server, self
}

// syscalls returns the read and write system calls pid has made, from
// /proc/<pid>/io.
func syscalls(b *testing.B, pid int) (reads, writes int64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	return reads, writes
}

// BenchmarkBodyDigest is the MD5 every message a RocketMQ 5 client
// receives carries: the clients check it, and the only digest they all
// write alike (Apache's proxy's choice too).
func BenchmarkBodyDigest(b *testing.B) {
	body := make([]byte, 1024)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		md5.Sum(body)
	}
}
