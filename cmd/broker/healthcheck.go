package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/internal/server"
)

// runHealthcheck runs "broker healthcheck": it asks a broker's HTTP
// endpoint whether it is ready, for a container's HEALTHCHECK, which has
// no curl in a distroless image. Exit status 0 means 200.
func runHealthcheck(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("broker healthcheck", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", server.DefaultHTTPListen, "the broker's HTTP endpoint (--http-listen), host:port")
	path := fs.String("path", "/readyz", "path to ask: /readyz (ready to serve) or /healthz (running)")
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: broker healthcheck [flags]\n\nExits 0 if the broker's HTTP endpoint answers the path with 200, else 1.\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "broker healthcheck: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	url := "http://" + *addr + "/" + strings.TrimPrefix(*path, "/")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintln(stderr, "broker healthcheck:", err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "broker healthcheck:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	fmt.Fprintf(stdout, "%s: %d %s\n", url, resp.StatusCode, strings.TrimSpace(string(body)))
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
