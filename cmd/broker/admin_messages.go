package main

import (
	"bytes"
	"compress/zlib"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/pflag"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/core/remoting"
)

// The message queries of mqadmin (queryMsgById, queryMsgByKey,
// queryMsgByUniqueKey).
func init() {
	addAdminCommands(
		adminCommand{
			group: "messages", verb: "by-id", summary: "Show a message by offsetMsgId (VIEW_MESSAGE_BY_ID), or by client msgId with --topic",
			args: func(fs *pflag.FlagSet) func() (any, error) {
				var a messageQuery
				fs.StringVar(&a.ID, "id", "", "the message's offsetMsgId, or its client msgId (UNIQ_KEY) with --topic (required)")
				fs.StringVar(&a.Topic, "topic", "", "the message's topic, to look the id up as a client msgId when it is not an offsetMsgId")
				bodyFlag := bodyBytesFlag(fs)
				return func() (any, error) {
					if a.ID == "" {
						return nil, errors.New("--id required")
					}
					a.BodyBytes = *bodyFlag
					// Without --broker, ask the broker the offsetMsgId names.
					a.IDAddr = !fs.Changed("broker")
					return a, nil
				}
			},
			call:  callMessageByID,
			print: printAs(printMessages),
		},
		adminCommand{
			group: "messages", verb: "by-key", summary: "Find a topic's messages by a key of their KEYS (QUERY_MESSAGE)",
			args:  messageQueryArgs(false),
			call:  callMessageQuery,
			print: printAs(printMessages),
		},
		adminCommand{
			group: "messages", verb: "by-unique-key", summary: "Find a topic's message by its client msgId, the UNIQ_KEY (QUERY_MESSAGE)",
			args:  messageQueryArgs(true),
			call:  callMessageQuery,
			print: printAs(printMessages),
		},
	)
}

// defaultBodyBytes is how much of a body is shown by default.
const defaultBodyBytes = 256

func bodyBytesFlag(fs *pflag.FlagSet) *int {
	return fs.Int("body-bytes", defaultBodyBytes, "show at most this many bytes of each body; -1 for all")
}

// messageQuery is the arguments of the message commands.
type messageQuery struct {
	ID, Key, Topic string
	Unique         bool
	Begin, End     time.Time // zero: unbounded
	Max            int
	BodyBytes      int
	IDAddr         bool // ask the address in the offsetMsgId, not --broker
}

func messageQueryArgs(unique bool) func(fs *pflag.FlagSet) func() (any, error) {
	return func(fs *pflag.FlagSet) func() (any, error) {
		a := messageQuery{Unique: unique}
		fs.StringVar(&a.Topic, "topic", "", "topic (required)")
		if unique {
			fs.StringVar(&a.Key, "id", "", "the client msgId, the message's UNIQ_KEY (required)")
		} else {
			fs.StringVar(&a.Key, "key", "", "a key of the messages' KEYS (required)")
			fs.IntVar(&a.Max, "max", 32, "at most this many messages (the broker caps it at 64)")
		}
		begin := fs.String("begin", "", "stored at or after (RFC 3339, or a duration ago such as 2h)")
		end := fs.String("end", "", "stored at or before (RFC 3339, or a duration ago)")
		bodyFlag := bodyBytesFlag(fs)
		return func() (any, error) {
			var missing []string
			if a.Topic == "" {
				missing = append(missing, "--topic")
			}
			if a.Key == "" && unique {
				missing = append(missing, "--id")
			} else if a.Key == "" {
				missing = append(missing, "--key")
			}
			if len(missing) > 0 {
				return nil, fmt.Errorf("%s required", strings.Join(missing, ", "))
			}
			var err error
			if a.Begin, err = parseWhen(*begin); err != nil {
				return nil, fmt.Errorf("--begin: %w", err)
			}
			if a.End, err = parseWhen(*end); err != nil {
				return nil, fmt.Errorf("--end: %w", err)
			}
			a.BodyBytes = *bodyFlag
			return a, nil
		}
	}
}

// messageView is one message as the message commands print it.
type messageView struct {
	MsgID           string            `json:"msgId"` // the client's UNIQ_KEY, else the offsetMsgId
	OffsetMsgID     string            `json:"offsetMsgId"`
	Topic           string            `json:"topic"`
	QueueID         int32             `json:"queueId"`
	QueueOffset     int64             `json:"queueOffset"`
	CommitLogOffset int64             `json:"commitLogOffset"`
	Tags            string            `json:"tags"`
	Keys            string            `json:"keys"`
	BornHost        string            `json:"bornHost"`
	BornTimestamp   int64             `json:"bornTimestamp"` // ms
	StoreHost       string            `json:"storeHost"`
	StoreTimestamp  int64             `json:"storeTimestamp"` // ms
	ReconsumeTimes  int32             `json:"reconsumeTimes"`
	SysFlag         int32             `json:"sysFlag"`
	Properties      map[string]string `json:"properties"`
	BodySize        int               `json:"bodySize"`     // as stored (compressed when sysFlag has 0x1)
	Body            string            `json:"body"`         // the first --body-bytes bytes, uncompressed
	BodyEncoding    string            `json:"bodyEncoding"` // "text", or "hex" for a body that is not UTF-8
	BodyTruncated   bool              `json:"bodyTruncated"`
}

func viewRecord(r message.Record, bodyBytes int) messageView {
	p := r.Properties()
	v := messageView{
		OffsetMsgID: message.OffsetMsgID(r.StoreHost(), r.CommitLogOffset()),
		Topic:       string(r.Topic()), QueueID: r.QueueID(), QueueOffset: r.QueueOffset(), CommitLogOffset: r.CommitLogOffset(),
		Tags: p.Tags(), Keys: p.Get(message.PropertyKeys),
		BornHost: r.BornHost().String(), BornTimestamp: r.BornTimestamp(),
		StoreHost: r.StoreHost().String(), StoreTimestamp: r.StoreTimestamp(),
		ReconsumeTimes: r.ReconsumeTimes(), SysFlag: r.SysFlag(),
		Properties: p.Map(), BodySize: len(r.Body()), BodyEncoding: "text",
	}
	if v.MsgID = p.Get(message.PropertyUniqKey); v.MsgID == "" {
		v.MsgID = v.OffsetMsgID
	}
	body := r.Body()
	if r.SysFlag()&message.SysFlagCompressed != 0 {
		if zr, err := zlib.NewReader(bytes.NewReader(body)); err == nil {
			limit := int64(math.MaxInt64)
			if bodyBytes >= 0 {
				limit = int64(bodyBytes) + 1
			}
			if plain, err := io.ReadAll(io.LimitReader(zr, limit)); err == nil || len(plain) > 0 {
				body = plain
			}
		}
	}
	if bodyBytes >= 0 && len(body) > bodyBytes {
		body, v.BodyTruncated = body[:bodyBytes], true
	}
	if utf8.Valid(body) || v.BodyTruncated && utf8.Valid(trimPartialRune(body)) {
		v.Body = string(trimPartialRune(body))
	} else {
		v.Body, v.BodyEncoding = hex.EncodeToString(body), "hex"
	}
	return v
}

// trimPartialRune drops a rune a truncation cut in two.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if r, _ := utf8.DecodeLastRune(b); r != utf8.RuneError {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// decodeMessages reads a QUERY_MESSAGE or VIEW_MESSAGE_BY_ID body.
func decodeMessages(body []byte, bodyBytes int) ([]messageView, error) {
	records, err := message.DecodeRecords(body)
	if err != nil {
		return nil, fmt.Errorf("cannot read the messages: %w", err)
	}
	out := []messageView{}
	for _, r := range records {
		out = append(out, viewRecord(r, bodyBytes))
	}
	return out, nil
}

func callMessageByID(ctx context.Context, s *adminSession, args any) (any, error) {
	a := args.(messageQuery)
	host, off, perr := message.ParseOffsetMsgID(a.ID)
	var viewErr error
	if perr == nil {
		addr := s.broker
		if a.IDAddr && host.Addr().IsValid() && !host.Addr().IsUnspecified() {
			addr = netip.AddrPortFrom(host.Addr().Unmap(), host.Port()).String()
		}
		resp, err := s.invoke(ctx, addr, remoting.ViewMessageByID, map[string]string{"offset": strconv.FormatInt(off, 10)}, nil)
		if err == nil {
			msgs, err := decodeMessages(resp.Body, a.BodyBytes)
			// A client msgId read as an offsetMsgId names an offset where
			// no record starts, or another record.
			if err == nil && len(msgs) == 1 && msgs[0].CommitLogOffset == off {
				return msgs, nil
			}
			if err == nil {
				err = fmt.Errorf("%s: no message starts at commit-log offset %d", addr, off)
			}
			viewErr = err
		} else {
			viewErr = err
		}
	}
	if a.Topic == "" {
		if perr != nil {
			return nil, fmt.Errorf("%q is not an offsetMsgId; give --topic to look it up as a client msgId", a.ID)
		}
		return nil, fmt.Errorf("%w (give --topic to look %s up as a client msgId)", viewErr, a.ID)
	}
	return callMessageQuery(ctx, s, messageQuery{Key: a.ID, Topic: a.Topic, Unique: true, BodyBytes: a.BodyBytes})
}

func callMessageQuery(ctx context.Context, s *adminSession, args any) (any, error) {
	a := args.(messageQuery)
	end := int64(math.MaxInt64)
	if !a.End.IsZero() {
		end = a.End.UnixMilli()
	}
	ext := map[string]string{
		"topic": a.Topic, "key": a.Key, "maxNum": strconv.Itoa(a.Max),
		"beginTimestamp": strconv.FormatInt(max(0, a.Begin.UnixMilli()), 10), "endTimestamp": strconv.FormatInt(end, 10),
	}
	if a.Begin.IsZero() {
		ext["beginTimestamp"] = "0"
	}
	if a.Unique {
		ext["_UNIQUE_KEY_QUERY"] = "true"
		ext["maxNum"] = "32"
	}
	resp, err := s.invoke(ctx, s.broker, remoting.QueryMessage, ext, nil)
	if err != nil {
		return nil, err
	}
	msgs, err := decodeMessages(resp.Body, a.BodyBytes)
	if err != nil {
		return nil, fmt.Errorf("%s: QUERY_MESSAGE: %w", s.broker, err)
	}
	if a.Unique {
		// The index may hold other records under the key's hash; RocketMQ's
		// tools keep the ones whose UNIQ_KEY is the key.
		msgs = slices.DeleteFunc(msgs, func(m messageView) bool { return m.Properties[message.PropertyUniqKey] != a.Key })
	}
	return msgs, nil
}

func printMessages(w io.Writer, msgs []messageView) error {
	for i, m := range msgs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		body := strconv.Quote(m.Body)
		if m.BodyEncoding == "hex" {
			body = "hex " + m.Body
		}
		if m.BodyTruncated {
			body += " …"
		}
		rows := [][]string{
			{"offsetMsgId", m.OffsetMsgID},
			{"topic", m.Topic},
			{"queue", fmt.Sprintf("%d, offset %d", m.QueueID, m.QueueOffset)},
			{"commit-log offset", fmt.Sprint(m.CommitLogOffset)},
			{"tags", dash(m.Tags)},
			{"keys", dash(m.Keys)},
			{"born", fmt.Sprintf("%s from %s", millis(m.BornTimestamp), m.BornHost)},
			{"stored", fmt.Sprintf("%s on %s", millis(m.StoreTimestamp), m.StoreHost)},
			{"reconsume times", fmt.Sprint(m.ReconsumeTimes)},
			{"sysFlag", fmt.Sprint(m.SysFlag)},
		}
		for _, k := range slices.Sorted(maps.Keys(m.Properties)) {
			rows = append(rows, []string{"property " + k, m.Properties[k]})
		}
		rows = append(rows, []string{"body", fmt.Sprintf("%d bytes: %s", m.BodySize, body)})
		if err := table(w, []string{"msgId", m.MsgID}, rows); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\n%d found\n", len(msgs))
	return err
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
