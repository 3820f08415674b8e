package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/internal/server"
	"github.com/rmq-go/rmq/plugins/natsbridge"
)

// The NATS bridge's commands (internal/server/natsbridge.go serves them).
func init() {
	addAdminCommands(adminCommand{
		group: "bridge", verb: "status", command: server.BridgeStatusCommand,
		summary: "Show the NATS bridge's connection, cursor, lag and counters",
		print:   printAs(printBridgeStatus),
	}, adminCommand{
		group: "bridge", verb: "subject", command: server.BridgeSubjectCommand,
		summary: "Print the NATS subject that carries a group's and topic's events (names escaped as the bridge does)",
		args: func(fs *pflag.FlagSet) func() (any, error) {
			var a server.BridgeSubjectArgs
			fs.StringVar(&a.Group, "group", "", "the consumer group (default: any)")
			fs.StringVar(&a.Topic, "topic", "", "the message's original topic (default: any)")
			fs.StringVar(&a.Kind, "kind", "", `"retry" or "dlq" (default: both)`)
			return func() (any, error) { return a, nil }
		},
		print: printAs(func(w io.Writer, s server.BridgeSubjects) error {
			_, err := fmt.Fprintf(w, "%s\nresend service: %s\n", s.Subject, s.Resend)
			return err
		}),
	})
}

func printBridgeStatus(w io.Writer, s natsbridge.Status) error {
	conn := s.Connection
	if s.URL != "" {
		conn += " to " + s.URL
	}
	if s.BackingOff {
		conn += " (backing off after an error)"
	}
	mode := string(s.Mode)
	if s.Stream != "" {
		mode += ", stream " + s.Stream
	}
	rows := [][]string{
		{"connection", conn},
		{"mode", mode},
		{"cursor", fmt.Sprintf("%d of %d (epoch %s)", s.Cursor, s.Head, s.Epoch)},
		{"lag", fmt.Sprintf("%d events, %s", s.LagEvents, (time.Duration(s.LagSeconds * float64(time.Second))).Round(time.Millisecond))},
		{"in flight", fmt.Sprint(s.InFlight)},
		{"published", fmt.Sprint(s.Published)},
		{"duplicates", fmt.Sprint(s.Duplicates)},
		{"expired", fmt.Sprint(s.Expired)},
		{"filtered", fmt.Sprint(s.Filtered)},
		{"unreadable", fmt.Sprint(s.Unreadable)},
		{"failures", fmt.Sprint(s.Failures)},
		{"resends", fmt.Sprint(s.Resends)},
	}
	if s.LastError != "" {
		rows = append(rows, []string{"last error", s.LastErrorAt.Format(time.RFC3339) + " " + s.LastError})
	}
	return table(w, []string{"BRIDGE", ""}, rows)
}
