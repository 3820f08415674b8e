package bench

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       time.Duration
		bad        bool
	}{
		{name: "cat", want: 0,
			line: "9910 (cat) R 9907 9907 29814 0 -1 4194304 98 0 0 0 0 0 0 0 20 0 1 0 1141764 3133440 363\n"},
		{name: "busy", want: 1234*10*time.Millisecond + 56*10*time.Millisecond,
			line: "42 (broker) S 1 42 42 0 -1 4194560 5000 0 3 0 1234 56 0 0 20 0 9 0 100 2000000 3000\n"},
		{name: "name with spaces and parentheses", want: 30 * time.Millisecond,
			line: "7 (a) b (c)) S 1 7 7 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 5 6 7\n"},
		{name: "no name", line: "7 a S 1", bad: true},
		{name: "short", line: "7 (a) S 1 7 7 0 -1 0 0 0 0 0 1", bad: true},
		{name: "not a number", line: "7 (a) S 1 7 7 0 -1 0 0 0 0 0 x 2 0 0\n", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseProcStat([]byte(tc.line))
			if tc.bad {
				if err == nil {
					t.Fatalf("parsed %q as %v, want an error", tc.line, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("parseProcStat = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// onLinux skips a test that reads this machine's /proc.
func onLinux(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
}

func TestProcessCPU(t *testing.T) {
	onLinux(t)
	before, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel has charged at least two ticks more.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		x := 0
		for i := range 1_000_000 {
			x += i
		}
		_ = x
		now, err := ProcessCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if now-before >= 20*time.Millisecond {
			return
		}
	}
	t.Fatal("10 s of spinning did not show in /proc/self/stat")
}

func TestProcessCPUNoProcess(t *testing.T) {
	if _, err := ProcessCPU(1 << 30); !errors.Is(err, ErrNoProc) {
		t.Fatalf("ProcessCPU of a pid that cannot exist: %v, want ErrNoProc", err)
	}
}

func TestListenerPID(t *testing.T) {
	onLinux(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pid, err := ListenerPID(ln.Addr().String())
	if err != nil || pid != os.Getpid() {
		t.Fatalf("ListenerPID(%s) = %d, %v; want this process, %d", ln.Addr(), pid, err, os.Getpid())
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if _, err := ListenerPID(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.2"), uint16(port)).String()); !errors.Is(err, ErrNoProc) {
		t.Errorf("ListenerPID of another address on the port: %v, want ErrNoProc", err)
	}
}

func TestListenInodes(t *testing.T) {
	tcp := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:2A8F 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1001 1 0 100 0 0 10 0
   1: 00000000:2A90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1002 1 0 100 0 0 10 0
   2: 0100007F:2A8F 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 1003 1 0 20 4 30 10 -1
   3: 0200007F:2A8F 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1004 1 0 100 0 0 10 0
`)
	tcp6 := []byte(`  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:2A8F 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2001 1 0 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:2A91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2002 1 0 100 0 0 10 0
`)
	for _, tc := range []struct {
		table []byte
		addr  string
		want  []string
	}{
		// 0x2A8F is 10895: the listener, not the connection on the same
		// port (state 01), nor the one on 127.0.0.2.
		{tcp, "127.0.0.1:10895", []string{"1001"}},
		{tcp, "127.0.0.2:10895", []string{"1004"}},
		// A listener on 0.0.0.0 serves every address.
		{tcp, "127.0.0.1:10896", []string{"1002"}},
		{tcp, "0.0.0.0:10895", []string{"1001", "1004"}},
		{tcp, "127.0.0.1:10897", nil},
		{tcp6, "[::1]:10895", []string{"2001"}},
		{tcp6, "127.0.0.1:10897", []string{"2002"}},
	} {
		got := listenInodes(tc.table, netip.MustParseAddrPort(tc.addr))
		if !slices.Equal(got, tc.want) {
			t.Errorf("listenInodes(%s) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}

func TestProduceBrokerCPU(t *testing.T) {
	onLinux(t)
	fb := startFake(t, true)
	opts := testOptions(fb.addr)
	opts.Count = 1000
	opts.BrokerPID = 1 << 30
	if _, err := Produce(context.Background(), opts, nil); !errors.Is(err, ErrNoProc) {
		t.Fatalf("Produce with a pid that cannot exist: %v, want ErrNoProc before the run", err)
	}
	// The fake broker runs in this process, so its CPU is this process's.
	opts.BrokerPID = os.Getpid()
	sum, err := Produce(context.Background(), opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sum.BrokerCPU < 0 || sum.BrokerCPUPerMsg != sum.BrokerCPU/time.Duration(sum.Messages) {
		t.Fatalf("broker CPU %v and %v per message over %d messages", sum.BrokerCPU, sum.BrokerCPUPerMsg, sum.Messages)
	}
}
