package natsbridge

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/rmq-go/rmq/core/outbox"
)

// ResendRequest is the JSON body of a request on
// <prefix>.<cluster>.ctl.resend.
type ResendRequest struct {
	// Group is the consumer group whose dead letter is resent.
	Group string `json:"group"`
	// MsgID picks the dead letter by the id the consumer saw, its original
	// id, or its offsetMsgId. QueueOffset picks it by its offset in the
	// group's dead-letter queue instead. Exactly one is required.
	MsgID       string `json:"msgId,omitempty"`
	QueueOffset *int64 `json:"queueOffset,omitempty"`
	// Target is "origin" (the message's topic, the default) or "retry"
	// (the group's retry topic: only this group consumes it again).
	Target string `json:"target,omitempty"`
	// Key is the idempotency key: a request repeated with the same key
	// within ResendKeyTTL is not resent again but answered as before.
	// Required, at most 256 bytes.
	Key string `json:"key"`
	// Broker, when set, addresses one broker of the cluster; the others
	// ignore the request.
	Broker string `json:"broker,omitempty"`
}

// ResendReply is the JSON reply to a ResendRequest.
type ResendReply struct {
	OK bool `json:"ok"`
	// Broker is the broker that answered.
	Broker string `json:"broker"`
	// Resent lists the new message, with its new msgId.
	Resent []outbox.Resent `json:"resent,omitempty"`
	// Duplicate is true when the key was seen before and this is the
	// first answer repeated.
	Duplicate bool `json:"duplicate,omitempty"`
	// Code classifies an error: bad_request, not_found, key_conflict,
	// interrupted or failed.
	Code  string `json:"code,omitempty"`
	Error string `json:"error,omitempty"`
}

// Reply codes.
const (
	CodeBadRequest  = "bad_request"
	CodeNotFound    = "not_found"
	CodeKeyConflict = "key_conflict"
	CodeInterrupted = "interrupted"
	CodeFailed      = "failed"
)

const maxKeyLen = 256

// keyRecord is what is kept durably per idempotency key, as JSON under
// resendPrefix + hex(SHA-256(key))[:32].
type keyRecord struct {
	Key     string       `json:"key"`     // the key itself, for operators
	Request string       `json:"request"` // the request it was used for
	At      int64        `json:"at"`      // when it was claimed, Unix ms
	Done    bool         `json:"done"`    // false: claimed, outcome unknown
	Reply   *ResendReply `json:"reply,omitempty"`
}

// resendService answers resend requests. Requests are handled one at a
// time on the subscription's goroutine, so two requests with one key never
// race.
type resendService struct {
	b     *Bridge
	r     Resender
	sub   *nats.Subscription
	count atomic.Int64

	mu struct {
		sync.Mutex
		closed    bool
		lastSweep time.Time
	}
}

func newResendService(b *Bridge) *resendService {
	return &resendService{b: b, r: b.opts.Resender}
}

func (s *resendService) start() error {
	s.mu.Lock()
	s.sweepLocked()
	s.mu.Unlock()
	subj := ResendSubject(s.b.opts.SubjectPrefix, s.b.opts.Cluster)
	sub, err := s.b.nc.Subscribe(subj, s.handle)
	if err != nil {
		return fmt.Errorf("natsbridge: subscribe to %s: %w", subj, err)
	}
	s.sub = sub
	if s.b.nc.IsConnected() {
		// So that a request sent once Start returns finds the service.
		s.b.nc.FlushTimeout(s.b.opts.PublishTimeout)
	}
	s.b.log.Info("serving dead-letter resends", "subject", subj)
	return nil
}

// stop unsubscribes and waits for a request being handled.
func (s *resendService) stop() {
	s.sub.Unsubscribe()
	s.mu.Lock()
	s.mu.closed = true
	s.mu.Unlock()
}

func (s *resendService) handle(m *nats.Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return
	}
	reply, delay := s.serveLocked(m.Data)
	if reply == nil || m.Reply == "" {
		return
	}
	reply.Broker = s.b.opts.Broker
	data, _ := json.Marshal(reply)
	if delay > 0 {
		time.AfterFunc(delay, func() { m.Respond(data) })
		return
	}
	if err := m.Respond(data); err != nil {
		s.b.log.Warn("resend reply not sent", "err", err)
	}
}

func failReply(code string, err error) *ResendReply {
	return &ResendReply{Code: code, Error: err.Error()}
}

// serveLocked runs one request. A nil reply means the request is another
// broker's; a positive delay asks to hold the reply back.
func (s *resendService) serveLocked(data []byte) (*ResendReply, time.Duration) {
	var req ResendRequest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return failReply(CodeBadRequest, fmt.Errorf("%w: %v", ErrBadRequest, err)), 0
	}
	if req.Broker != "" && req.Broker != s.b.opts.Broker {
		return nil, 0
	}
	if err := req.check(); err != nil {
		return failReply(CodeBadRequest, err), 0
	}
	if req.Target == "" {
		req.Target = outbox.ResendOrigin
	}
	now := s.b.opts.Now()
	if now.Sub(s.mu.lastSweep) > s.sweepEvery() {
		s.sweepLocked()
	}
	fp := req.fingerprint()
	name := keyName(req.Key)
	if v, ok, err := s.r.Record(name); err != nil {
		return failReply(CodeFailed, err), 0
	} else if ok {
		var rec keyRecord
		if err := json.Unmarshal(v, &rec); err == nil && now.Sub(time.UnixMilli(rec.At)) < s.b.opts.ResendKeyTTL {
			switch {
			case rec.Request != fp:
				return failReply(CodeKeyConflict, fmt.Errorf("%w (%s)", ErrKeyConflict, rec.Request)), 0
			case !rec.Done || rec.Reply == nil:
				return failReply(CodeInterrupted, fmt.Errorf("%w at %s: it may or may not have been resent; check the group, then use a new key",
					ErrInterrupted, time.UnixMilli(rec.At).UTC().Format(TimeFormat))), 0
			}
			r := *rec.Reply
			r.Duplicate = true
			return &r, 0
		}
	}

	sel := outbox.DLQSelector{Group: req.Group, MsgID: req.MsgID, QueueOffset: req.QueueOffset, Limit: 1}
	if found, err := s.r.ListDLQ(sel); err != nil || len(found) == 0 {
		if err == nil {
			err = fmt.Errorf("%w in group %s", outbox.ErrNoDeadLetter, req.Group)
		}
		code := CodeFailed
		if errors.Is(err, outbox.ErrNoDeadLetter) {
			code = CodeNotFound
		}
		var delay time.Duration
		if code == CodeNotFound && req.Broker == "" {
			delay = s.b.opts.NotFoundGrace
		}
		return failReply(code, err), delay
	}

	rec := keyRecord{Key: req.Key, Request: fp, At: now.UnixMilli()}
	if err := s.put(name, &rec); err != nil {
		return failReply(CodeFailed, err), 0
	}
	resent, err := s.r.ResendDLQ(sel, req.Target)
	if errors.Is(err, outbox.ErrNoDeadLetter) {
		// Nothing was resent: free the key.
		if derr := s.r.DeleteRecord(name); derr != nil {
			s.b.log.Warn("resend key not released", "key", req.Key, "err", derr)
		}
		return failReply(CodeNotFound, err), 0
	}
	reply := &ResendReply{OK: err == nil, Resent: resent}
	if err != nil {
		// The outcome of a failed append is not certain; the key keeps
		// this answer so a retry cannot resend twice.
		reply.Code, reply.Error = CodeFailed, err.Error()
	} else {
		s.count.Add(int64(len(resent)))
	}
	rec.Done, rec.Reply = true, reply
	if err := s.put(name, &rec); err != nil {
		s.b.log.Warn("resend key not marked done; a retry with it will be refused as interrupted", "key", req.Key, "err", err)
	}
	return reply, 0
}

func (s *resendService) put(name string, rec *keyRecord) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return s.r.PutRecord(name, v)
}

func (s *resendService) sweepEvery() time.Duration {
	return max(s.b.opts.ResendKeyTTL/24, time.Minute)
}

// sweepLocked forgets keys older than ResendKeyTTL.
func (s *resendService) sweepLocked() {
	now := s.b.opts.Now()
	s.mu.lastSweep = now
	var old []string
	err := s.r.EachRecord(resendPrefix, func(name string, v []byte) error {
		var rec keyRecord
		if json.Unmarshal(v, &rec) != nil || now.Sub(time.UnixMilli(rec.At)) >= s.b.opts.ResendKeyTTL {
			old = append(old, name)
		}
		return nil
	})
	if err != nil {
		s.b.log.Warn("resend keys not swept", "err", err)
		return
	}
	for _, name := range old {
		if err := s.r.DeleteRecord(name); err != nil {
			s.b.log.Warn("resend key not forgotten", "name", name, "err", err)
			return
		}
	}
}

func (r *ResendRequest) check() error {
	var errs []error
	if r.Group == "" {
		errs = append(errs, errors.New("group is required"))
	}
	if (r.MsgID == "") == (r.QueueOffset == nil) {
		errs = append(errs, errors.New("exactly one of msgId and queueOffset is required"))
	}
	if r.Target != "" && r.Target != outbox.ResendOrigin && r.Target != outbox.ResendRetry {
		errs = append(errs, fmt.Errorf("target %q: want %q or %q", r.Target, outbox.ResendOrigin, outbox.ResendRetry))
	}
	if r.Key == "" || len(r.Key) > maxKeyLen {
		errs = append(errs, fmt.Errorf("an idempotency key of 1..%d bytes is required", maxKeyLen))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return nil
}

// fingerprint identifies what a request asks for, to tell a retry from a
// reused key.
func (r *ResendRequest) fingerprint() string {
	off := ""
	if r.QueueOffset != nil {
		off = strconv.FormatInt(*r.QueueOffset, 10)
	}
	return "group=" + r.Group + " msgId=" + r.MsgID + " queueOffset=" + off + " target=" + r.Target
}

func keyName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return resendPrefix + hex.EncodeToString(sum[:16])
}
