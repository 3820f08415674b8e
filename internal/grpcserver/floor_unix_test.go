//go:build unix

package grpcserver_test

import (
	"bufio"
	"context"
	"crypto/md5"
	"fmt"
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

	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/internal/bench"
	pb "github.com/rmq-go/rmq/internal/rmqpb"
)

// The transport floor: what each protocol's server costs per send when
// the send does nothing. BenchmarkTransportFloor runs a server that
// answers every send at once, with no store behind it, in a child
// process (this test binary again), loads it from this process with 64
// connections of one send in flight each, as `broker bench protocols`
// loads a broker, and reports the child's CPU per send. What a broker
// spends beyond it is its own work, the same over both protocols, so the
// difference between the two floors is what gRPC adds to each send.

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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	switch proto {
	case "grpc":
		// The options that shape the transport's work are the broker's
		// (server.go): fixed flow-control windows.
		s := grpc.NewServer(grpc.InitialWindowSize(256<<10), grpc.InitialConnWindowSize(1<<20))
		pb.RegisterMessagingServiceServer(s, floorGRPC{})
		go s.Serve(ln)
	case "remoting":
		s := remoting.NewServer(remoting.ServerOptions{})
		var off atomic.Int64
		s.Handle(remoting.SendMessageV2, func(_ *remoting.Conn, req *remoting.Command) *remoting.Command {
			resp := remoting.NewResponse(req, remoting.Success, "")
			resp.SetFields("msgId", "7F00000100002A9F0000000000000000", "queueId", "0", "queueOffset", strconv.FormatInt(off.Add(1), 10))
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

// floorGRPC answers every send OK at once.
type floorGRPC struct {
	pb.UnimplementedMessagingServiceServer
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

// floorConns is the connections, one send in flight each, as load 1 of
// `broker bench protocols`.
const floorConns = 64

func BenchmarkTransportFloor(b *testing.B) {
	body := make([]byte, 1024)
	b.Run("remoting", func(b *testing.B) {
		addr, pid := startFloor(b, "remoting")
		props := "UNIQ_KEY\x01" + "7F000001000000000000000000000000" + "\x02WAIT\x01true\x02TAGS\x01t"
		runFloor(b, pid, func() (func(i int) error, func()) {
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
		runFloor(b, pid, func() (func(i int) error, func()) {
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

// runFloor sends b.N times over floorConns connections that dial makes,
// and reports the sends per second and the server's CPU per send.
func runFloor(b *testing.B, pid int, dial func() (send func(i int) error, close func())) {
	sends := make([]func(int) error, floorConns)
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
	errs := make(chan error, floorConns)
	cpu0, err := bench.ProcessCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	r0, w0 := syscalls(b, pid)
	t0 := time.Now()
	b.ResetTimer()
	for _, send := range sends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
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
	cpu1, err := bench.ProcessCPU(pid)
	if err != nil {
		b.Fatal(err)
	}
	r1, w1 := syscalls(b, pid)
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
	b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N), "server-cpu-ns/msg")
	b.ReportMetric(float64(r1-r0)/float64(b.N), "server-reads/msg")
	b.ReportMetric(float64(w1-w0)/float64(b.N), "server-writes/msg")
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
