package message

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
)

// RecallHandle names a delayed or timed message while it waits on a
// broker, so that its producer can recall it. Its text is RocketMQ's
// version 1 handle, base64 (URL alphabet) of "v1 topic broker due msgID"
// separated by spaces, which clients decode to find the broker to ask,
// followed by where this broker parked the message: its parking topic,
// queue and offset.
type RecallHandle struct {
	Topic  string // the message's topic
	Broker string // the broker holding it
	Due    int64  // when it is due, Unix ms
	MsgID  string // its UNIQ_KEY
	Park   string // the topic it waits in
	Queue  int32  // its queue there
	Offset int64  // its offset there
}

// MaxRecallHandleLen bounds a handle's text before it is decoded.
const MaxRecallHandleLen = 1024

// ErrBadRecallHandle is the error of a handle that is not one this
// project's brokers make.
var ErrBadRecallHandle = errors.New("recall handle is invalid")

// String encodes h.
func (h RecallHandle) String() string {
	raw := strings.Join([]string{"v1", h.Topic, h.Broker, strconv.FormatInt(h.Due, 10), h.MsgID,
		h.Park, strconv.Itoa(int(h.Queue)), strconv.FormatInt(h.Offset, 10)}, " ")
	return base64.URLEncoding.EncodeToString([]byte(raw))
}

// ParseRecallHandle decodes a handle made by String, with or without its
// base64 padding. Every field but Due must be present, and none may hold
// a space.
func ParseRecallHandle(s string) (RecallHandle, error) {
	if s == "" || len(s) > MaxRecallHandleLen {
		return RecallHandle{}, ErrBadRecallHandle
	}
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return RecallHandle{}, ErrBadRecallHandle
	}
	f := strings.Split(string(raw), " ")
	if len(f) != 8 || f[0] != "v1" {
		return RecallHandle{}, ErrBadRecallHandle
	}
	due, err1 := strconv.ParseInt(f[3], 10, 64)
	q, err2 := strconv.ParseInt(f[6], 10, 32)
	off, err3 := strconv.ParseInt(f[7], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || q < 0 || off < 0 ||
		f[1] == "" || f[2] == "" || f[4] == "" || f[5] == "" {
		return RecallHandle{}, ErrBadRecallHandle
	}
	return RecallHandle{Topic: f[1], Broker: f[2], Due: due, MsgID: f[4], Park: f[5], Queue: int32(q), Offset: off}, nil
}
