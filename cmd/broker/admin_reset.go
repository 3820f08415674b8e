package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/core/broker"
)

// "broker admin offsets reset": move a consumer group's offsets on a topic
// to a moment, as INVOKE_BROKER_TO_RESET_OFFSET does (the broker's
// offsets.reset command).
func init() {
	addAdminCommands(adminCommand{
		group: "offsets", verb: "reset", command: "offsets.reset",
		summary: "Reset a consumer group's offsets on a topic to a time; live consumers move at once, a stopped group resumes there",
		args: func(fs *pflag.FlagSet) func() (any, error) {
			group := fs.String("group", "", "consumer group (required)")
			topic := fs.String("topic", "", "topic (required)")
			ts := fs.String("timestamp", "", `RFC 3339 time ("2026-12-01T10:00:00Z"), Unix milliseconds, or "now" (required)`)
			force := fs.Bool("force", false, "also move offsets forward (without it a queue already before the time keeps its offset)")
			return func() (any, error) {
				var problems []error
				if *group == "" {
					problems = append(problems, errors.New("--group required"))
				}
				if *topic == "" {
					problems = append(problems, errors.New("--topic required"))
				}
				ms, err := parseResetTime(*ts, time.Now())
				if err != nil {
					problems = append(problems, err)
				}
				if err := errors.Join(problems...); err != nil {
					return nil, err
				}
				return broker.ResetArgs{Group: *group, Topic: *topic, Timestamp: ms, Force: *force, QueueID: -1, Offset: -1}, nil
			}
		},
		print: printAs(printReset),
	})
}

// parseResetTime reads --timestamp: RFC 3339, Unix milliseconds or "now".
func parseResetTime(s string, now time.Time) (int64, error) {
	switch {
	case s == "":
		return 0, errors.New("--timestamp required")
	case s == "now":
		return now.UnixMilli(), nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 {
			return 0, fmt.Errorf("--timestamp %d: milliseconds must not be negative", ms)
		}
		return ms, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("--timestamp %q: want RFC 3339 (2026-12-01T10:00:00Z) or Unix milliseconds", s)
	}
	return t.UnixMilli(), nil
}

func printReset(w io.Writer, r broker.ResetResult) error {
	var rows [][]string
	for _, o := range r.Offsets {
		rows = append(rows, []string{fmt.Sprint(o.QueueID), fmt.Sprint(o.Offset)})
	}
	if err := table(w, []string{"QUEUE", "OFFSET"}, rows); err != nil {
		return err
	}
	told := ""
	if len(r.Told) > 0 {
		told = ": " + strings.Join(r.Told, ", ")
	}
	_, err := fmt.Fprintf(w, "%s%s\n", r.Remark, told)
	return err
}
