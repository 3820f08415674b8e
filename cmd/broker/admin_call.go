package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/rmq-go/rmq/core/acl"
	"github.com/rmq-go/rmq/core/remoting"
)

// The mqadmin commands (admin_cluster.go, admin_topics.go, admin_groups.go,
// admin_connections.go, admin_messages.go) ask the broker and the name
// server with RocketMQ's own request codes, as mqadmin does, instead of
// the broker's admin command (broker.AdminCode): they work against any
// broker that serves those codes, and need nothing registered.
//
// Their answer is what they print, as a Go value; --json prints that
// value's JSON, one line, with the field names of the table's columns.
// They do not print the raw bodies: GET_CONSUME_STATS and
// GET_TOPIC_STATS_INFO are written the fastjson way (objects as map keys),
// which is not JSON, and a verb often joins several answers (RATIONALE.md).

// adminSession is what a call has to talk to: the client, the broker's
// address (--broker) and the account that signs requests.
type adminSession struct {
	cl     *remoting.Client
	broker string
	ak, sk string
}

// codeError is an answer other than SUCCESS: the code's name, its number
// and the broker's remark.
type codeError struct {
	addr   string
	code   int16
	remark string
}

func (e *codeError) Error() string {
	return fmt.Sprintf("%s: %s (%d): %s", e.addr, remoting.ResponseCode(e.code), e.code, e.remark)
}

// remoteError is the error of an answer other than SUCCESS from addr.
func remoteError(addr string, resp *remoting.Command) error {
	return &codeError{addr: addr, code: resp.Code, remark: resp.Remark}
}

// invoke sends a request with RocketMQ code code to addr, signed when an
// access key is set, and returns the answer; an answer other than SUCCESS
// is a *codeError.
func (s *adminSession) invoke(ctx context.Context, addr string, code int16, ext map[string]string, body []byte) (*remoting.Command, error) {
	req := remoting.NewRequest(code, ext, body)
	if s.ak != "" {
		acl.Sign(req, s.ak, s.sk, "")
	}
	resp, err := s.cl.Invoke(ctx, addr, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", addr, remoting.RequestCode(code), err)
	}
	if resp.Code != remoting.Success {
		return nil, remoteError(addr, resp)
	}
	return resp, nil
}

// invokeJSON is invoke decoding the answer's JSON body into v.
func (s *adminSession) invokeJSON(ctx context.Context, addr string, code int16, ext map[string]string, v any) error {
	resp, err := s.invoke(ctx, addr, code, ext, nil)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(resp.Body, v); err != nil {
		return fmt.Errorf("%s: %s: cannot read the answer: %w", addr, remoting.RequestCode(code), err)
	}
	return nil
}

// runCall runs a command that has a call: the call's answer is encoded as
// JSON, then printed as --json or the command's print function say. A
// failed call exits 1 after printing what it returned with its answer, if
// anything (a cluster list with one broker down).
func runCall(ctx context.Context, cl *remoting.Client, cmd *adminCommand, name string, args any, broker, ak, sk string, asJSON bool, stdout, stderr io.Writer) int {
	if ak != "" && sk == "" {
		sk = os.Getenv("RMQ_SECRET_KEY")
	}
	s := &adminSession{cl: cl, broker: broker, ak: ak, sk: sk}
	v, err := cmd.call(ctx, s, args)
	var partial *partialError
	if err != nil && !errors.As(err, &partial) {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return 1
	}
	answer, jerr := json.Marshal(v)
	if jerr != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, jerr)
		return 1
	}
	if asJSON || cmd.print == nil {
		var out bytes.Buffer
		if asJSON {
			out.Write(answer)
		} else if err := json.Indent(&out, answer, "", "  "); err != nil {
			out.Write(answer)
		}
		out.WriteByte('\n')
		stdout.Write(out.Bytes())
	} else if perr := cmd.print(stdout, answer); perr != nil {
		fmt.Fprintf(stderr, "%s: cannot print the answer: %v\n", name, perr)
		return 1
	}
	if partial != nil {
		for _, e := range partial.errs {
			fmt.Fprintf(stderr, "%s: %v\n", name, e)
		}
		return 1
	}
	return 0
}

// partialError is returned by a call whose answer is printed although
// some of its requests failed.
type partialError struct{ errs []error }

func (e *partialError) Error() string { return errors.Join(e.errs...).Error() }

// queueEntry is one entry of a map keyed by MessageQueue.
type queueEntry[V any] struct {
	Queue remoting.QueueKey
	Value V
}

// decodeQueueKeyed reads the field of a stats body that holds a map keyed
// by MessageQueue objects, written the fastjson way:
//
//	{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{…},…}}
//
// It returns the entries in the order written.
func decodeQueueKeyed[V any](body []byte, field string) ([]queueEntry[V], error) {
	raw, err := remoting.FastjsonField(body, field)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		return nil, fmt.Errorf("no %s in the answer", field)
	}
	var out []queueEntry[V]
	err = remoting.ParseQueueKeyed(raw, func(q remoting.QueueKey, v []byte) error {
		e := queueEntry[V]{Queue: q}
		if err := json.Unmarshal(v, &e.Value); err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// sortRows sorts rows by a key of each.
func sortRows[T any](rows []T, key func(T) string) {
	slices.SortStableFunc(rows, func(a, b T) int { return strings.Compare(key(a), key(b)) })
}

// numberField reads a number field of a stats body, which is not JSON as
// a whole (see decodeQueueKeyed).
func numberField(body []byte, field string) (float64, bool) {
	raw, err := remoting.FastjsonField(body, field)
	if err != nil || raw == nil {
		return 0, false
	}
	var v float64
	return v, json.Unmarshal(raw, &v) == nil
}
