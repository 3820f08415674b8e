package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/broker"
	"github.com/rmq-go/rmq/core/remoting"
	"github.com/rmq-go/rmq/core/store"
)

// adminCommand is one "broker admin <group> <verb>" command: its flags, the
// admin command it asks the broker to run (broker.AdminCode) and how it
// prints the answer. A subsystem adds its commands with addAdminCommands
// from an init function in its own admin_<group>.go file.
type adminCommand struct {
	group, verb string
	command     string // the broker's admin command
	summary     string
	// args declares the command's flags on fs and returns the function
	// that builds the request's JSON arguments once fs is parsed. Nil: the
	// command takes none.
	args func(fs *pflag.FlagSet) func() (any, error)
	// print writes the answer for people. Nil prints the JSON indented.
	print func(w io.Writer, answer json.RawMessage) error
	// call, when set, replaces the admin command: it asks with RocketMQ's
	// request codes and returns the answer to print (admin_call.go).
	call func(ctx context.Context, s *adminSession, args any) (any, error)
}

// adminCommands is the table of "broker admin" commands.
var adminCommands []adminCommand

// addAdminCommands adds commands to "broker admin". A group and verb may
// be registered once.
func addAdminCommands(cmds ...adminCommand) {
	for _, c := range cmds {
		if findAdminCommand(c.group, c.verb) != nil {
			panic(fmt.Sprintf("broker admin %s %s registered twice", c.group, c.verb))
		}
		adminCommands = append(adminCommands, c)
	}
}

func findAdminCommand(group, verb string) *adminCommand {
	for i := range adminCommands {
		if adminCommands[i].group == group && adminCommands[i].verb == verb {
			return &adminCommands[i]
		}
	}
	return nil
}

// adminUsage lists the commands, or only a group's.
func adminUsage(w io.Writer, group string) {
	fmt.Fprint(w, "Usage: broker admin [--broker addr] [--json] <group> <verb> [flags]\n\nCommands:\n")
	cmds := slices.Clone(adminCommands)
	slices.SortFunc(cmds, func(a, b adminCommand) int {
		return strings.Compare(a.group+" "+a.verb, b.group+" "+b.verb)
	})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range cmds {
		if group == "" || c.group == group {
			fmt.Fprintf(tw, "  %s %s\t%s\n", c.group, c.verb, c.summary)
		}
	}
	tw.Flush()
	fmt.Fprint(w, "\nRun \"broker admin <group> <verb> -h\" for a command's flags.\n")
}

// adminTimeout bounds one admin request; the broker gives a command 30 s.
const adminTimeout = 35 * time.Second

func runAdmin(args []string, stdout, stderr io.Writer) int {
	global := pflag.NewFlagSet("broker admin", pflag.ContinueOnError)
	global.SetOutput(stderr)
	global.SetInterspersed(false) // the group and verb end the global flags
	var (
		addr    = global.String("broker", "127.0.0.1:10911", "the broker's address")
		asJSON  = global.Bool("json", false, "print the answer as one line of JSON: the broker's for admin commands, the table's rows for the others")
		timeout = global.Duration("timeout", adminTimeout, "give up after this long")
		ak      = global.String("access-key", os.Getenv("RMQ_ACCESS_KEY"), "an admin account's access key, when the broker checks access (env RMQ_ACCESS_KEY)")
		sk      = global.String("secret-key", "", "that account's secret key (default: env RMQ_SECRET_KEY)")
	)
	global.Usage = func() {
		adminUsage(stderr, "")
		fmt.Fprintf(stderr, "\nFlags:\n%s", global.FlagUsages())
	}
	if err := global.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	rest := global.Args()
	if len(rest) < 2 {
		group := ""
		if len(rest) == 1 {
			group = rest[0]
		}
		adminUsage(stderr, group)
		return 2
	}
	cmd := findAdminCommand(rest[0], rest[1])
	if cmd == nil {
		fmt.Fprintf(stderr, "broker admin: unknown command %q\n\n", rest[0]+" "+rest[1])
		adminUsage(stderr, "")
		return 2
	}
	name := "broker admin " + cmd.group + " " + cmd.verb
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	build := func() (any, error) { return nil, nil }
	if cmd.args != nil {
		build = cmd.args(fs)
	}
	fs.AddFlagSet(global) // the global flags may follow the verb too
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s [flags]\n\n%s.\n\nFlags:\n%s", name, cmd.summary, fs.FlagUsages())
	}
	if err := fs.Parse(rest[2:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, err)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", name, fs.Arg(0))
		return 2
	}
	a, err := build()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 2
	}
	var body []byte
	if a != nil {
		if body, err = json.Marshal(a); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return 2
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	cl := remoting.NewClient(remoting.ClientOptions{Logger: slog.New(slog.DiscardHandler)})
	defer cl.Close()
	if cmd.call != nil {
		return runCall(ctx, cl, cmd, name, a, *addr, *ak, *sk, *asJSON, stdout, stderr)
	}
	req := remoting.NewRequest(broker.AdminCode, map[string]string{"command": cmd.command}, body)
	if *ak != "" {
		secret := *sk
		if secret == "" {
			secret = os.Getenv("RMQ_SECRET_KEY")
		}
		acl.Sign(req, *ak, secret, "")
	}
	resp, err := cl.Invoke(ctx, *addr, req)
	if err != nil {
		fmt.Fprintf(stderr, "%s: broker %s: %v\n", name, *addr, err)
		return 1
	}
	if resp.Code != remoting.Success {
		fmt.Fprintf(stderr, "%s: %v\n", name, remoteError(*addr, resp))
		return 1
	}
	if *asJSON || cmd.print == nil {
		var out bytes.Buffer
		if *asJSON {
			out.Write(resp.Body)
		} else if err := json.Indent(&out, resp.Body, "", "  "); err != nil {
			out.Write(resp.Body)
		}
		out.WriteByte('\n')
		stdout.Write(out.Bytes())
		return 0
	}
	if err := cmd.print(stdout, resp.Body); err != nil {
		fmt.Fprintf(stderr, "%s: cannot read the answer: %v\n", name, err)
		return 1
	}
	return 0
}

// table writes rows under a header, columns aligned.
func table(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// printAs decodes an answer into T and hands it to fn.
func printAs[T any](fn func(w io.Writer, v T) error) func(io.Writer, json.RawMessage) error {
	return func(w io.Writer, answer json.RawMessage) error {
		var v T
		if err := json.Unmarshal(answer, &v); err != nil {
			return err
		}
		return fn(w, v)
	}
}

// The broker's own commands.
func init() {
	addAdminCommands(
		adminCommand{
			group: "topics", verb: "list", command: "topics.list",
			summary: "List the broker's topics",
			print: printAs(func(w io.Writer, topics map[string]broker.TopicConfig) error {
				var rows [][]string
				for _, name := range slices.Sorted(maps.Keys(topics)) {
					tc := topics[name]
					rows = append(rows, []string{name, fmt.Sprint(tc.ReadQueueNums), fmt.Sprint(tc.WriteQueueNums), permString(tc.Perm), fmt.Sprint(tc.Order), typeString(tc.MessageType, tc.LiteExpiration)})
				}
				return table(w, []string{"TOPIC", "READ", "WRITE", "PERM", "ORDER", "TYPE"}, rows)
			}),
		},
		adminCommand{
			group: "topics", verb: "lite", command: "topics.lite",
			summary: "List a LITE topic's lite topics: their offsets and when each was last written",
			args: func(fs *pflag.FlagSet) func() (any, error) {
				topic := fs.String("topic", "", "the LITE topic (required)")
				after := fs.String("after", "", "list the lite topics after this one (the last of the previous page)")
				limit := fs.Int("limit", 100, "at most this many")
				return func() (any, error) {
					if *topic == "" {
						return nil, errors.New("--topic required")
					}
					return map[string]any{"topic": *topic, "after": *after, "limit": *limit}, nil
				}
			},
			print: printAs(func(w io.Writer, l broker.LiteTopicList) error {
				var rows [][]string
				for _, r := range l.Rows {
					rows = append(rows, []string{r.LiteTopic, fmt.Sprint(r.MinOffset), fmt.Sprint(r.MaxOffset), fmt.Sprint(r.MaxOffset - r.MinOffset), millis(r.LastWritten)})
				}
				if err := table(w, []string{"LITE TOPIC", "MIN", "MAX", "MESSAGES", "LAST WRITTEN"}, rows); err != nil {
					return err
				}
				_, err := fmt.Fprintf(w, "%d of %d lite topics of %s\n", len(l.Rows), l.Total, l.Topic)
				return err
			}),
		},
		adminCommand{
			group: "offsets", verb: "list", command: "offsets.list",
			summary: "List committed consumer offsets",
			args: func(fs *pflag.FlagSet) func() (any, error) {
				group := fs.String("group", "", "only this consumer group")
				return func() (any, error) { return map[string]string{"group": *group}, nil }
			},
			print: printAs(func(w io.Writer, offsets []store.ConsumerOffsetEntry) error {
				var rows [][]string
				for _, o := range offsets {
					rows = append(rows, []string{o.Group, o.Topic, fmt.Sprint(o.QueueID), fmt.Sprint(o.Offset)})
				}
				return table(w, []string{"GROUP", "TOPIC", "QUEUE", "OFFSET"}, rows)
			}),
		},
	)
}
