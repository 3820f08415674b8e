package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/core/allocate"
	"github.com/rmq-go/rmq/core/broker"
)

// The consumer-group commands of core/broker (the allocate command is in
// admin_plugins.go).
func init() {
	addAdminCommands(adminCommand{
		group: "consumers", verb: "strategy", command: "consumers.strategy",
		summary: "Show or set the queue-allocation strategy QUERY_ASSIGNMENT uses for a consumer group",
		args: func(fs *pflag.FlagSet) func() (any, error) {
			var a broker.StrategyArgs
			fs.StringVar(&a.Group, "group", "", "consumer group (required)")
			fs.StringVar(&a.Strategy, "strategy", "", fmt.Sprintf("set the group's strategy: %v (case-insensitive)", allocate.Names()))
			fs.BoolVar(&a.Clear, "clear", false, "unset the group's strategy, leaving it to plugins and clients")
			return func() (any, error) {
				if a.Group == "" {
					return nil, errors.New("--group required")
				}
				if a.Clear && a.Strategy != "" {
					return nil, errors.New("--strategy and --clear exclude each other")
				}
				return a, nil
			}
		},
		print: printAs(printGroupStrategy),
	})
}

func printGroupStrategy(w io.Writer, s broker.GroupStrategy) error {
	configured := s.Configured
	if configured == "" {
		configured = "(none)"
	}
	_, err := fmt.Fprintf(w, "group %s: configured %s; assignments use %s (%s)\n", s.Group, configured, s.Effective, s.Source)
	return err
}
