// Command broker runs an rmq-go broker, by default with an embedded name
// server:
//
//	broker [flags]              run a broker (and a name server)
//	broker namesrv [flags]      run a name server alone
//	broker bench produce|consume [flags]
//	                            load-generate against a broker, over
//	                            remoting or gRPC (--protocol)
//	broker bench compare [flags]
//	                            this broker against NATS JetStream, one table
//	broker bench protocols [flags]
//	                            gRPC against remoting on this broker
//	broker bench memory [flags]
//	                            this broker's resident memory under load
//	broker admin [--broker addr] <group> <verb> [flags]
//	                            ask a running broker and name server, as
//	                            mqadmin does (cluster list, topics status,
//	                            consumers progress, messages by-key, ...)
//	broker config defaults [--markdown]
//	                            the config file with every key at its default
//	broker config check FILE...
//	                            every problem of a config file
//	broker healthcheck [flags]  exit 0 if a broker's /readyz answers 200
//	broker import --from DIR [flags]
//	                            bring an Apache RocketMQ broker's topics,
//	                            groups, offsets and broker.conf across
//	broker plugin new|build|test ...
//	                            write a WebAssembly plugin's Go module, build
//	                            it, and run it on sample messages
//
// Run "broker -h" or "broker <command> -h" for the flags. SIGHUP makes a
// running broker reload the plugin list of its config file.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/rmq-go/rmq/internal/server"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "bench" && os.Args[1] != "admin" && os.Args[1] != "config" && os.Args[1] != "healthcheck" && os.Args[1] != "import" && os.Args[1] != "plugin") {
		setGCPercent() // servers only: the load generator and tools keep Go's default
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// defaultGCPercent is the garbage collector's target the broker runs with
// unless GOGC is set. The broker's own heap is small (the index's memtables
// and block cache are allocated outside it), so Go's default of 100 makes
// it collect often under load; at 200 a pipelined send costs about 8% less
// CPU (`broker bench produce --conns 4 --inflight 128`, 8.4 → 7.7 µs per
// message) for 5–12 MiB more resident memory in each stage of
// `broker bench memory`.
const defaultGCPercent = 200

func setGCPercent() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// run is main without the process: it returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "namesrv":
			return runNamesrv(args[1:], stdout, stderr)
		case "bench":
			return runBench(args[1:], stdout, stderr)
		case "admin":
			return runAdmin(args[1:], stdout, stderr)
		case "config":
			return runConfig(args[1:], stdout, stderr)
		case "healthcheck":
			return runHealthcheck(args[1:], stdout, stderr)
		case "import":
			return runImport(args[1:], stdout, stderr)
		case "plugin":
			return runPlugin(args[1:], stdout, stderr)
		case "help":
			fmt.Fprint(stdout, usage)
			return 0
		}
	}
	return runBroker(args, stdout, stderr)
}

const usage = `Usage:
  broker [flags]                        run a broker with an embedded name server
  broker namesrv [flags]                run a name server alone
  broker bench produce|consume [flags]  load-generate against a broker (--protocol remoting|grpc)
  broker bench compare [flags]          this broker against NATS JetStream on this machine
  broker bench protocols [flags]        RocketMQ 5 (gRPC) against 4.x (remoting) clients on this broker
  broker bench memory [flags]           this broker's resident memory: idle, connections, backlog, long-polls
  broker bench hostile [flags]          this broker's peak memory under hostile clients, and a client's latency meanwhile
  broker admin <group> <verb> [flags]   ask a running broker (run "broker admin" for the list)
  broker config defaults [--markdown]   print the config file with every key at its default and a comment
  broker config check FILE...           report every problem of a config file
  broker healthcheck [flags]            exit 0 if a broker's /readyz answers 200 (a container's health check)
  broker import --from DIR [flags]      bring an Apache RocketMQ broker's topics, groups, offsets and broker.conf across
  broker plugin new|build|test ...      write, build and try a WebAssembly plugin (run "broker plugin" for more)

Run "broker <command> -h" for the flags of a command.
`

// shutdownTimeout bounds a graceful shutdown.
const shutdownTimeout = 30 * time.Second

// reloadTimeout bounds a plugin reload started by SIGHUP.
const reloadTimeout = 2 * time.Minute

func runBroker(args []string, stdout, stderr io.Writer) int {
	cfg, pprofAddr, code := brokerConfig(args, stderr)
	if code >= 0 {
		return code
	}
	return serveBroker(cfg, pprofAddr)
}

// serveBroker runs a broker on cfg, and net/http/pprof on pprofAddr
// unless it is empty, until SIGINT or SIGTERM; it returns the exit code.
func serveBroker(cfg server.Config, pprofAddr string) int {
	log := cfg.Logger
	if pprofAddr != "" {
		ln, err := net.Listen("tcp", pprofAddr)
		if err != nil {
			log.Error("pprof listen", "addr", pprofAddr, "err", err)
			return 1
		}
		defer ln.Close()
		go http.Serve(ln, nil) // the default mux carries net/http/pprof
		log.Info("serving profiles", "addr", ln.Addr().String())
	}
	// Catch the signals before starting, so one sent as soon as the broker
	// says it started reloads or stops it gracefully instead of killing
	// the process; one sent during startup waits for it.
	hup, stop := catchSignals()
	defer signal.Stop(hup)
	defer signal.Stop(stop)
	srv, err := server.Start(cfg)
	if err != nil {
		log.Error("broker failed to start", "err", err)
		return 1
	}
	nsInfo := "off"
	if srv.NamesrvAddr != "" {
		nsInfo = srv.NamesrvAddr
	}
	httpInfo := "off"
	if a := srv.HTTPAddr(); a != "" {
		httpInfo = a
	}
	grpcInfo := "off"
	if srv.GRPCAddr != "" {
		grpcInfo = srv.GRPCAddr
	}
	vipInfo := "off"
	if srv.VIPAddr != "" {
		vipInfo = srv.VIPAddr
	}
	log.Info("broker started", "listen", srv.BrokerAddr, "namesrv", nsInfo, "http", httpInfo, "grpc", grpcInfo, "register_with", strings.Join(append(cfg.NameServers, srv.NamesrvAddr), ","),
		"data_dir", srv.DataPath(), "flush", cfg.Store.Flush.String(), "tls", srv.TLSMode(), "vip", vipInfo)

	return serveUntilSignal(srv, log, hup, stop, "listener failed", func() {
		// Each reload logs its outcome; a refused one leaves the current
		// plugins, access control or certificates in force.
		ctx, cancel := context.WithTimeout(context.Background(), reloadTimeout)
		srv.ReloadPlugins(ctx)
		cancel()
		srv.ReloadACL()
		srv.ReloadTLS()
	})
}

// catchSignals starts catching SIGHUP on hup, and SIGINT and SIGTERM on
// stop; the caller stops them with signal.Stop.
func catchSignals() (hup, stop chan os.Signal) {
	hup, stop = make(chan os.Signal, 1), make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	return hup, stop
}

// serveUntilSignal runs srv until SIGINT or SIGTERM from sigs (a graceful
// shutdown) or a listener failure (logged as failed), calling reload at
// each SIGHUP from hup; it returns the exit code.
func serveUntilSignal(srv *server.Server, log *slog.Logger, hup, sigs <-chan os.Signal, failed string, reload func()) int {
	for {
		select {
		case <-hup:
			reload()
		case sig := <-sigs:
			log.Info("shutting down", "signal", sig.String())
			if !shutdown(srv, log) {
				return 1
			}
			return 0
		case err := <-srv.Err():
			log.Error(failed, "err", err)
			shutdown(srv, log)
			return 1
		}
	}
}

func shutdown(srv *server.Server, log *slog.Logger) bool {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Error("shutdown", "err", err)
		return false
	}
	log.Info("stopped")
	return true
}

func runNamesrv(args []string, stdout, stderr io.Writer) int {
	cfg, code := namesrvConfig(args, stderr)
	if code >= 0 {
		return code
	}
	return serveNamesrv(cfg)
}

// serveNamesrv runs a name server on cfg until SIGINT or SIGTERM; it
// returns the exit code.
func serveNamesrv(cfg server.Config) int {
	log := cfg.Logger
	hup, stop := catchSignals()
	defer signal.Stop(hup)
	defer signal.Stop(stop)
	srv, err := server.StartNamesrv(cfg)
	if err != nil {
		log.Error("name server failed to start", "err", err)
		return 1
	}
	log.Info("name server started", "listen", srv.NamesrvAddr, "acl", srv.ACLEnabled(), "tls", srv.TLSMode())
	return serveUntilSignal(srv, log, hup, stop, "name server failed", func() {
		srv.ReloadACL()
		srv.ReloadTLS()
	})
}
