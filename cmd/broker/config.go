package main

import (
	"encoding"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/cluster"
	"github.com/rmq-go/rmq/internal/server"
)

// brokerConfig works out what the broker runs with. Each setting comes
// from its flag if the command line gives it, else from the config file,
// else from the component's default (the zero value here; the
// exceptions are the embedded name server, the HTTP endpoint, the gRPC
// endpoint and the VIP channel, which the command runs unless told not
// to). It returns a usage error's exit code, or -1.
func brokerConfig(args []string, stderr io.Writer) (cfg server.Config, pprofAddr string, code int) {
	cfg = server.Config{NamesrvListen: server.DefaultNamesrvListen, HTTPListen: server.DefaultHTTPListen, GRPCListen: server.DefaultGRPCListen, VIPListen: server.DefaultVIPListen}
	var configPath string
	var set setFlags
	flagsOnly := cfg
	fs := brokerFlags(&flagsOnly, &configPath, &pprofAddr, stderr)
	set.bind(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return cfg, "", 0
		}
		fmt.Fprintln(stderr, err)
		return cfg, "", 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "broker: unknown command %q\n%s", fs.Arg(0), usage)
		return cfg, "", 2
	}
	if configPath == "" {
		cfg = flagsOnly
	} else {
		if err := cfg.ReadFile(configPath); err != nil {
			fmt.Fprintln(stderr, "broker:", err)
			return cfg, "", 2
		}
		cfg.PluginSource = server.PluginFile(configPath)
		cfg.ACLSource = server.ACLFile(configPath)
		// The flags again, over the file: each one's default is now the
		// file's value, so only those given replace it. The arguments
		// parsed above, so they parse again.
		again := brokerFlags(&cfg, &configPath, &pprofAddr, io.Discard)
		(&setFlags{}).bind(again)
		again.Parse(args)
	}
	if err := set.apply(&cfg); err != nil {
		fmt.Fprintln(stderr, "broker:", err)
		return cfg, "", 2
	}
	var err error
	if cfg.Logger, err = server.NewLogger(stderr, cfg.LogFormat, cfg.LogLevel); err != nil {
		fmt.Fprintln(stderr, "broker:", err)
		return cfg, "", 2
	}
	return cfg, pprofAddr, -1
}

// brokerFlags binds the broker's flags to c; a flag's default is c's
// value. Each flag is named after its config file key.
func brokerFlags(c *server.Config, configPath, pprofAddr *string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("broker", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: broker [flags]\n\nRuns a broker with an embedded name server.\n\nFlags:\n%s", fs.FlagUsages())
	}
	fs.StringVar(&c.Listen, "listen", c.Listen, "broker listen address (default "+server.DefaultListen+")")
	fs.StringVar(&c.Advertise, "advertise", c.Advertise, "address clients dial (default: the listen address)")
	fs.StringVar(&c.NamesrvListen, "namesrv-listen", c.NamesrvListen, "embedded name server address; empty disables it")
	fs.StringVar(&c.GRPCListen, "grpc-listen", c.GRPCListen, "gRPC address for RocketMQ 5 clients; empty disables it")
	fs.StringVar(&c.VIPListen, "vip-listen", c.VIPListen, "second address for the same requests, the VIP channel old Java clients send to; auto: the listen port - 2; empty disables it")
	fs.StringSliceVar(&c.NameServers, "namesrv", c.NameServers, "external name servers to register with (host:port, repeatable or comma-separated)")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "data directory (default "+server.DefaultDataDir+")")
	fs.Var(textFlag{&c.Store.Flush}, "flush", "flush mode: sync (ack after fsync, group commit) or async (fsync on an interval)")
	fs.Var(textFlag{&c.LogLevel}, "log-level", "log level: debug, info, warn or error")
	fs.Var(logFormatFlag{&c.LogFormat}, "log-format", "log format: text (key=value lines) or json (one JSON object a line)")
	fs.Var(textFlag{&c.Broker.DelayLevels}, "delay-levels", "delay of each level, space-separated, units s, m, h or d (default \""+broker.DefaultDelayLevels+"\")")
	fs.BoolVar(&c.Insecure, "insecure", c.Insecure, "allow listening on a non-loopback address with access control (acl:) off")
	fs.StringVar(configPath, "config", *configPath, "YAML config file; flags override it")
	fs.StringVar(&c.HTTPListen, "http-listen", c.HTTPListen, "HTTP endpoint (/metrics, /healthz, /readyz) address; empty disables it")
	fs.BoolVar(&c.HTTPPprof, "http-pprof", c.HTTPPprof, "serve Go profiles under /debug/pprof/ on the HTTP endpoint")
	fs.StringVar(pprofAddr, "pprof-listen", *pprofAddr, "serve Go profiles (net/http/pprof) on this address alone; empty disables (see also --http-pprof)")
	return fs
}

// setFlags are the flags of a replicated set's member; each replaces the
// config file's cluster: value it names.
type setFlags struct {
	name, node, peers string
	join, recover     bool
}

func (f *setFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&f.name, "set-name", "", "run as a member of this replicated broker set (its brokerName in routes); needs --node-id and --peers")
	fs.StringVar(&f.node, "node-id", "", "this member's id among --peers")
	fs.StringVar(&f.peers, "peers", "", "every member of the set, this one included: id=host:port of raft's port, comma-separated (keep it on a private network)")
	fs.BoolVar(&f.recover, "recover-membership", false, "rewrite this member's raft membership to --peers before starting: for a set that lost its majority for good (see docs/replication.md)")
	fs.BoolVar(&f.join, "join", false, "with no raft state yet, wait to be added to the running set (broker admin cluster add-member) instead of bootstrapping it")
}

func (f *setFlags) apply(c *server.Config) error {
	if f.name == "" && f.node == "" && f.peers == "" && !f.join && !f.recover {
		return nil
	}
	if c.Cluster == nil {
		c.Cluster = &cluster.Options{}
	}
	if f.join {
		c.Cluster.Join = true
	}
	if f.recover {
		c.Cluster.Recover = true
	}
	if f.name != "" {
		c.Cluster.SetName = f.name
	}
	if f.node != "" {
		c.Cluster.NodeID = f.node
	}
	if f.peers != "" {
		peers, err := cluster.ParsePeers(f.peers)
		if err != nil {
			return err
		}
		c.Cluster.Peers = peers
	}
	if c.Cluster.SetName == "" || c.Cluster.NodeID == "" || len(c.Cluster.Peers) == 0 {
		return errors.New("a replicated set's member needs --set-name, --node-id and --peers (or cluster: in the config file)")
	}
	return nil
}

// textFlag is a flag whose value parses as it does in the config file.
type textFlag struct {
	v interface {
		encoding.TextUnmarshaler
		fmt.Stringer
	}
}

func (f textFlag) Set(s string) error { return f.v.UnmarshalText([]byte(s)) }

func (f textFlag) Type() string { return "string" }

func (f textFlag) String() string {
	if f.v == nil {
		return ""
	}
	return f.v.String()
}

// logFormatFlag is --log-format: text or json.
type logFormatFlag struct{ v *string }

func (f logFormatFlag) Set(s string) error {
	if _, err := server.NewLogger(io.Discard, s, nil); err != nil {
		return err
	}
	*f.v = s
	return nil
}

func (f logFormatFlag) Type() string { return "string" }

func (f logFormatFlag) String() string {
	if f.v == nil || *f.v == "" {
		return server.LogText
	}
	return *f.v
}

// namesrvConfig works out what "broker namesrv" runs with, as brokerConfig
// does for the broker: flags over the config file over defaults. The file
// is the broker's: a name server alone uses its namesrvListen,
// embeddedNamesrv, remoting, tls, acl, insecure, logLevel and logFormat.
func namesrvConfig(args []string, stderr io.Writer) (cfg server.Config, code int) {
	cfg = server.Config{NamesrvListen: server.DefaultNamesrvListen}
	var configPath string
	flagsOnly := cfg
	fs := namesrvFlags(&flagsOnly, &configPath, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return cfg, 0
		}
		fmt.Fprintln(stderr, err)
		return cfg, 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "broker namesrv: unexpected argument %q\n", fs.Arg(0))
		return cfg, 2
	}
	if configPath == "" {
		cfg = flagsOnly
	} else {
		if err := cfg.ReadFile(configPath); err != nil {
			fmt.Fprintln(stderr, "broker namesrv:", err)
			return cfg, 2
		}
		cfg.ACLSource = server.ACLFile(configPath)
		namesrvFlags(&cfg, &configPath, io.Discard).Parse(args)
	}
	var err error
	if cfg.Logger, err = server.NewLogger(stderr, cfg.LogFormat, cfg.LogLevel); err != nil {
		fmt.Fprintln(stderr, "broker namesrv:", err)
		return cfg, 2
	}
	return cfg, -1
}

// namesrvFlags binds the flags of "broker namesrv" to c.
func namesrvFlags(c *server.Config, configPath *string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet("broker namesrv", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: broker namesrv [flags]\n\nRuns a name server alone.\n\nFlags:\n%s", fs.FlagUsages())
	}
	fs.StringVar(&c.NamesrvListen, "listen", c.NamesrvListen, "name server listen address")
	fs.DurationVar(&c.EmbeddedNamesrv.BrokerExpiry, "broker-expiry", c.EmbeddedNamesrv.BrokerExpiry, "drop a broker that has not registered for this long (default 2m0s)")
	fs.Var(textFlag{&c.LogLevel}, "log-level", "log level: debug, info, warn or error")
	fs.Var(logFormatFlag{&c.LogFormat}, "log-format", "log format: text (key=value lines) or json (one JSON object a line)")
	fs.BoolVar(&c.Insecure, "insecure", c.Insecure, "allow listening on a non-loopback address with access control (acl:) off")
	fs.StringVar(&c.HTTPListen, "http-listen", c.HTTPListen, "HTTP endpoint (/metrics, /healthz, /readyz) address; empty (the default) disables it")
	fs.StringVar(configPath, "config", *configPath, "YAML config file (the broker's format); flags override it")
	return fs
}
