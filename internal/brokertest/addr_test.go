//go:build unix

package brokertest

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// TestStableAddrReserved checks that a port StableAddr handed out is
// refused to StableAddr in another test process while this one runs.
func TestStableAddrReserved(t *testing.T) {
	if p := os.Getenv("RMQ_RESERVE_PORT"); p != "" {
		port, _ := strconv.Atoi(p)
		if reservePort(port) {
			os.Exit(3) // reserved twice
		}
		os.Exit(0)
	}
	_, p, err := net.SplitHostPort(StableAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	if port < stableLow || port >= ephemeralLow() {
		t.Fatalf("port %d outside [%d, %d)", port, stableLow, ephemeralLow())
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestStableAddrReserved$")
	cmd.Env = append(os.Environ(), "RMQ_RESERVE_PORT="+p)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("another process reserved port %d too: %v\n%s", port, err, out)
	}
}
