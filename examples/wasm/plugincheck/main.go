package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/rmq-go/rmq/plugins/wasm"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// multi collects a repeated flag.
type multi []string

func (m *multi) String() string     { return strings.Join(*m, ", ") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("plugincheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		kind      = fs.String("kind", "filter", "kind to load the module for: filter, allocate, txncheck or transform")
		name      = fs.String("name", "", "plugin name (default: the file name)")
		config    = fs.String("config", "", "config bytes passed to broker_init")
		sha       = fs.String("sha256", "", "expected sha256 of the module, hex")
		untrusted = fs.Bool("untrusted", false, "run with the deadline and interruption checks")
		exprs     multi
		env       multi
	)
	fs.Var(&exprs, "expr", "filter expression to compile (repeatable)")
	fs.Var(&env, "env", "KEY=VALUE for the module's environment (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: plugincheck [flags] module.wasm")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	path := fs.Arg(0)
	o := wasm.Options{
		Name:      *name,
		Kind:      wasm.Kind(*kind),
		Path:      path,
		SHA256:    *sha,
		Config:    []byte(*config),
		Untrusted: *untrusted,
		Env:       map[string]string{},
	}
	if o.Name == "" {
		o.Name = strings.TrimSuffix(path[strings.LastIndexByte(path, '/')+1:], ".wasm")
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		o.Env[k] = v
	}
	ctx := context.Background()
	p, err := wasm.Load(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer p.Close(ctx)
	status := 0
	for _, e := range exprs {
		if _, err := p.Filter(e); err != nil {
			fmt.Fprintln(stderr, err)
			status = 1
			continue
		}
		fmt.Fprintf(stdout, "expression %q: ok\n", e)
	}
	s := p.Stats()
	version := s.Version
	if version == "" {
		version = "(none)"
	}
	fmt.Fprintf(stdout, "plugin %q: kind %s, ABI v%d, version %s, sha256 %s, init and self-tests passed\n",
		s.Name, s.Kind, s.ABI, version, s.SHA256)
	return status
}
