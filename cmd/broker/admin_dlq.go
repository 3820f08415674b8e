package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/core/outbox"
)

// The dead-letter commands (core/broker/dlq.go serves them).
func init() {
	addAdminCommands(
		adminCommand{
			group: "dlq", verb: "list", command: "dlq.list",
			summary: "List a consumer group's dead letters (one by id, or a time range)",
			args: func(fs *pflag.FlagSet) func() (any, error) {
				sel := dlqSelectorFlags(fs)
				return func() (any, error) { return sel() }
			},
			print: printAs(printDeadLetters),
		},
		adminCommand{
			group: "dlq", verb: "resend", command: "dlq.resend",
			summary: "Send dead letters again, as new messages, to their original topic or the group's retry topic",
			args: func(fs *pflag.FlagSet) func() (any, error) {
				sel := dlqSelectorFlags(fs)
				target := fs.String("to", outbox.ResendOrigin, `where to: "origin" (the message's topic) or "retry" (the group's retry topic)`)
				all := fs.Bool("all", false, "resend every dead letter in the range (without --msg-id or --offset)")
				return func() (any, error) {
					s, err := sel()
					if err != nil {
						return nil, err
					}
					if s.MsgID == "" && s.QueueOffset == nil && !*all {
						return nil, errors.New("name one message with --msg-id or --offset, or pass --all")
					}
					if *target != outbox.ResendOrigin && *target != outbox.ResendRetry {
						return nil, fmt.Errorf("--to %q: want origin or retry", *target)
					}
					return struct {
						outbox.DLQSelector
						Target string `json:"target"`
					}{s, *target}, nil
				}
			},
			print: printAs(printResent),
		},
	)
}

// dlqSelectorFlags declares the flags that pick dead letters.
func dlqSelectorFlags(fs *pflag.FlagSet) func() (outbox.DLQSelector, error) {
	group := fs.String("group", "", "consumer group (required)")
	id := fs.String("msg-id", "", "message id (the client's msgId, the original id, or the offsetMsgId)")
	offset := fs.Int64("offset", -1, "queue offset in the dead-letter queue")
	from := fs.String("from", "", "stored at or after (RFC 3339, or a duration ago such as 2h)")
	to := fs.String("to-time", "", "stored at or before (RFC 3339, or a duration ago)")
	limit := fs.Int("limit", 0, "at most this many (list default 100)")
	return func() (outbox.DLQSelector, error) {
		sel := outbox.DLQSelector{Group: *group, MsgID: *id, Limit: *limit}
		if sel.Group == "" {
			return sel, errors.New("--group is required")
		}
		if *offset >= 0 {
			sel.QueueOffset = offset
		}
		var err error
		if sel.From, err = parseWhen(*from); err != nil {
			return sel, fmt.Errorf("--from: %w", err)
		}
		if sel.To, err = parseWhen(*to); err != nil {
			return sel, fmt.Errorf("--to-time: %w", err)
		}
		return sel, nil
	}
}

// parseWhen reads an RFC 3339 time or a duration before now.
func parseWhen(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return t, fmt.Errorf("%q is neither an RFC 3339 time nor a duration", s)
	}
	return t, nil
}

func printDeadLetters(w io.Writer, dls []outbox.DeadLetter) error {
	if len(dls) == 0 {
		_, err := fmt.Fprintln(w, "no dead letters")
		return err
	}
	rows := make([][]string, 0, len(dls))
	for _, d := range dls {
		rows = append(rows, []string{strconv.FormatInt(d.QueueOffset, 10), d.MsgID, d.Topic, d.Tags, d.Keys,
			strconv.Itoa(int(d.ReconsumeTimes)), d.StoredAt.Format(time.RFC3339), strconv.Itoa(d.BodySize)})
	}
	return table(w, []string{"OFFSET", "MSG ID", "TOPIC", "TAGS", "KEYS", "TRIES", "STORED", "BYTES"}, rows)
}

func printResent(w io.Writer, rs []outbox.Resent) error {
	rows := make([][]string, 0, len(rs))
	for _, r := range rs {
		rows = append(rows, []string{strconv.FormatInt(r.QueueOffset, 10), r.OldMsgID, r.NewMsgID, r.Topic, strconv.Itoa(int(r.QueueID))})
	}
	return table(w, []string{"DLQ OFFSET", "OLD MSG ID", "NEW MSG ID", "TOPIC", "QUEUE"}, rows)
}
