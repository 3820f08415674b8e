package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/internal/server"
)

const configUsage = `Usage:
  broker config defaults [--markdown]   print the config file with every key at its default, each with a comment
  broker config check FILE...           report every problem of config files; exit status 1 if any
`

// runConfig runs "broker config": the config reference and the file
// checker, both made from the struct tags the broker's loader reads.
func runConfig(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, configUsage)
		return 2
	}
	switch args[0] {
	case "defaults":
		fs := pflag.NewFlagSet("broker config defaults", pflag.ContinueOnError)
		fs.SetOutput(stderr)
		markdown := fs.Bool("markdown", false, "print the reference as Markdown (docs/config.md) instead of YAML")
		if err := fs.Parse(args[1:]); err != nil {
			if errors.Is(err, pflag.ErrHelp) {
				return 0
			}
			return 2
		}
		if fs.NArg() > 0 {
			fmt.Fprintf(stderr, "broker config defaults: unexpected argument %q\n", fs.Arg(0))
			return 2
		}
		write := server.WriteDefaults
		if *markdown {
			write = server.WriteMarkdown
		}
		if err := write(stdout); err != nil {
			fmt.Fprintln(stderr, "broker config defaults:", err)
			return 1
		}
		return 0
	case "check":
		files := args[1:]
		if len(files) > 0 && (files[0] == "-h" || files[0] == "--help") {
			fmt.Fprint(stdout, configUsage)
			return 0
		}
		if len(files) == 0 {
			fmt.Fprint(stderr, configUsage)
			return 2
		}
		code := 0
		for _, f := range files {
			errs := server.CheckFile(f)
			for _, err := range errs {
				fmt.Fprintf(stdout, "%s: %v\n", f, err)
			}
			if len(errs) > 0 {
				code = 1
			} else {
				fmt.Fprintf(stdout, "%s: ok\n", f)
			}
		}
		return code
	case "-h", "--help", "help":
		fmt.Fprint(stdout, configUsage)
		return 0
	}
	fmt.Fprintf(stderr, "broker config: unknown command %q\n%s", args[0], configUsage)
	return 2
}
