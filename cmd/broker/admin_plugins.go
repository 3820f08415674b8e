package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/internal/server"
)

// The plugin commands (internal/server/plugins.go serves them).
func init() {
	addAdminCommands(
		adminCommand{
			group: "plugins", verb: "list", command: "plugins.list",
			summary: "List the WASM plugins with their module, version and call statistics",
			print:   printAs(printPlugins),
		},
		adminCommand{
			group: "plugins", verb: "reload", command: "plugins.reload",
			summary: "Re-read the plugin list of the broker's config file and apply it (all or nothing)",
			print:   printAs(printReload),
		},
		adminCommand{
			group: "consumers", verb: "allocate", command: "allocate",
			summary: "Show the queues of a topic the group's strategy assigns to one of its consumers",
			args: func(fs *pflag.FlagSet) func() (any, error) {
				var a server.AllocateArgs
				fs.StringVar(&a.Group, "group", "", "consumer group (required)")
				fs.StringVar(&a.Topic, "topic", "", "topic (required)")
				fs.StringVar(&a.ClientID, "client", "", "the consumer's client id (required)")
				return func() (any, error) {
					var missing []string
					for _, f := range []struct{ flag, v string }{{"--group", a.Group}, {"--topic", a.Topic}, {"--client", a.ClientID}} {
						if f.v == "" {
							missing = append(missing, f.flag)
						}
					}
					if len(missing) > 0 {
						return nil, fmt.Errorf("%s required", strings.Join(missing, ", "))
					}
					return a, nil
				}
			},
			print: printAs(printAllocate),
		},
	)
}

func printPlugins(w io.Writer, ps []server.PluginStatus) error {
	if len(ps) == 0 {
		_, err := fmt.Fprintln(w, "no plugins")
		return err
	}
	var rows [][]string
	for _, p := range ps {
		serves := p.ExpressionType
		if p.Kind != "filter" {
			serves = "groups " + strings.Join(p.Groups, ",")
			if len(p.Groups) == 0 {
				serves = "default"
			}
		}
		state := "ok"
		if p.Disabled {
			state = "disabled"
		}
		version := p.Version
		if version == "" {
			version = "-"
		}
		p99 := "-"
		if p.Calls > 0 {
			p99 = time.Duration(p.P99Nanos).String()
		}
		rows = append(rows, []string{p.Name, p.Kind, serves, version, fmt.Sprint(p.Generation), short(p.SHA256),
			fmt.Sprint(p.Calls), fmt.Sprint(p.Errors), fmt.Sprint(p.Traps), fmt.Sprint(p.Timeouts), p99, state})
	}
	if err := table(w, []string{"NAME", "KIND", "SERVES", "VERSION", "GEN", "SHA256", "CALLS", "ERRORS", "TRAPS", "TIMEOUTS", "P99", "STATE"}, rows); err != nil {
		return err
	}
	var lastErrors []string
	for _, p := range ps {
		if p.LastError != "" {
			lastErrors = append(lastErrors, p.Name+": last error: "+p.LastError)
		}
	}
	if len(lastErrors) > 0 {
		fmt.Fprintf(w, "\n%s\n", strings.Join(lastErrors, "\n"))
	}
	return nil
}

// short abbreviates a hash for a table.
func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

func printReload(w io.Writer, r server.ReloadResult) error {
	printed := false
	for _, line := range []struct {
		what  string
		names []string
	}{{"added", r.Added}, {"reloaded", r.Reloaded}, {"removed", r.Removed}, {"unchanged", r.Unchanged}} {
		if len(line.names) > 0 {
			fmt.Fprintf(w, "%-10s %s\n", line.what+":", strings.Join(line.names, ", "))
			printed = true
		}
	}
	if !printed {
		fmt.Fprintln(w, "no plugins configured")
	}
	return nil
}

func printAllocate(w io.Writer, r server.AllocateResult) error {
	fmt.Fprintf(w, "group %s, topic %s: %d queues for %s by %s (%d consumers)\n", r.Group, r.Topic, len(r.Queues), r.ClientID, r.Strategy, len(r.Clients))
	if r.Error != "" {
		fmt.Fprintf(w, "the strategy failed, so the previous assignment stands: %s\n", r.Error)
	}
	if len(r.Queues) == 0 {
		return nil
	}
	var rows [][]string
	for _, q := range r.Queues {
		rows = append(rows, []string{q.BrokerName, fmt.Sprint(q.QueueID)})
	}
	return table(w, []string{"BROKER", "QUEUE"}, rows)
}
