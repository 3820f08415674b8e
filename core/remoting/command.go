package remoting

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
)

// Errors of this package. Each says what becomes of the connection it
// happened on.
var (
	// ErrMalformed marks bytes that do not hold a frame: a bad length, an
	// unknown serialization type, a header that does not parse. All decoding
	// failures wrap it. The connection that sent it is closed, because the
	// stream can no longer be trusted to be at a frame boundary.
	ErrMalformed = errors.New("remoting: malformed frame")
	// ErrFrameTooLarge is returned for a frame longer than the configured
	// maximum, and by encoders for a command the frame format cannot hold (a
	// header over 16 MiB, an extFields key over 32767 bytes in the binary
	// header). A peer that sends one is disconnected; an encoding failure
	// leaves the connection open, since nothing was written.
	ErrFrameTooLarge = errors.New("remoting: frame too large")
	// ErrClosed is returned by calls on a connection that is gone, and wraps
	// the reason a pending call failed when its connection went away. The
	// connection does not survive it, by definition; a Client redials on the
	// next call.
	ErrClosed = errors.New("remoting: connection closed")
	// ErrServerClosed is returned by Serve after Shutdown. Its connections are
	// closed.
	ErrServerClosed = errors.New("remoting: server closed")
	// ErrClientClosed is returned by a Client's calls after Close. Its
	// connections are closed.
	ErrClientClosed = errors.New("remoting: client closed")
	// ErrMissingField is returned by the typed extFields readers for a
	// required key that is absent or empty. The connection survives: the
	// handler answers the request with an error code.
	ErrMissingField = errors.New("remoting: missing header field")
	// ErrInvalidField is returned by the typed extFields readers for a value
	// that does not parse as the requested type. The connection survives.
	ErrInvalidField = errors.New("remoting: invalid header field")
)

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))
}

// Serialization types: the top byte of the frame's header-length word.
const (
	SerializeJSON     byte = 0 // header is a JSON object; what the Go client sends
	SerializeRocketMQ byte = 1 // header is the ROCKETMQ binary layout; Java clients may send it
)

// Flag bits of Command.Flag.
const (
	FlagResponse int32 = 1 << 0 // the command answers the request with the same opaque
	FlagOneway   int32 = 1 << 1 // the request wants no response
)

// Language names that this package writes. Commands it creates say
// LanguageGo, since that is what the server is written in; RocketMQ clients
// do not act on the language of what they receive.
const (
	LanguageGo   = "GO"
	LanguageJava = "JAVA"
)

// DefaultVersion is the version written into commands this package creates:
// the ordinal of RocketMQ V4_9_8. Clients keep a response's version as the
// broker version, and some compare it with real version numbers, so it must
// be a real, non-negative one.
const DefaultVersion int16 = 409

// Command is one request or response, in either serialization.
type Command struct {
	// Code is the request code of a request (RequestCode) or the response
	// code of a response (ResponseCode). On the wire: JSON "code", binary
	// int16.
	Code int16
	// Language names the sender's implementation language, such as "GO" or
	// "JAVA". Informational only. On the wire: JSON "language" (a string),
	// binary a one-byte language code.
	Language string
	// Version is the sender's RocketMQ version ordinal (the Go client sends
	// 317). On the wire: JSON "version", binary int16.
	Version int16
	// Opaque is the request id; a response echoes its request's. On the
	// wire: JSON "opaque", binary int32.
	Opaque int32
	// Flag holds FlagResponse and FlagOneway. On the wire: JSON "flag",
	// binary int32.
	Flag int32
	// Remark is free text, the error description in responses. On the wire:
	// JSON "remark" (string or null), binary int32 length + bytes.
	Remark string
	// ExtFields is the per-code header ("custom header"). Every value is a
	// string on the wire: numbers and booleans are written as their text.
	// On the wire: JSON "extFields" (object or null), binary int32 length +
	// entries. A JSON response a Client received, and a request decoded
	// for a FastHandler, leave it nil and keep the fields as pairs until
	// they are read through Get, Fields or the typed readers, which build
	// it; code reading such a command uses those.
	ExtFields map[string]string
	// Body is the raw bytes after the header. A decoded Body aliases the
	// frame it was decoded from.
	Body []byte
	// SerializeType is the header serialization the command was received in
	// or is to be sent in: SerializeJSON or SerializeRocketMQ. A response is
	// always sent in the serialization of its request.
	SerializeType byte
	// Reservation, set on a response a handler built within a
	// reservation (Conn.ReserveResponse), is released once the response
	// is queued, or when it cannot be sent.
	Reservation Reservation
	// refusalLogged marks a refusal already logged, by Authorize's hook
	// or by Conn.noteRefusal, so that it is logged once.
	refusalLogged bool
	// ReleaseBody, when set on a command a Conn sends, is called with Body
	// once the connection refers to it no more: when its bytes have been
	// copied into the connection's buffer or written, or the send failed.
	// A body still queued when the connection closes is left to the
	// garbage collector. Senders use it to reuse large bodies.
	ReleaseBody func(body []byte)
	// rawExt holds the extFields as key, value pairs while ExtFields is
	// nil, as SetFields gives them. The accessors below build the map on
	// first use.
	rawExt []string
	// lazyExt holds the extFields of a request decoded for a FastHandler,
	// or of a response decoded by a Client, which skip building the map
	// (decodeFrame's lazy): the decoded header's text, from lazyAt on the
	// places of its keys and values in it, alternating, each as two
	// little-endian uint32 (start, end). The strings and where they are
	// take one allocation. Like rawExt it stands until the map is built;
	// DecodeSendHeaderOf reads it directly.
	lazyExt string
	lazyAt  int
	// pooled is the pooled buffer Body was copied into, if any (Recycle).
	pooled *[]byte
	// fast holds a request's fastOnReader and fastAnswered flags while a
	// FastHandler serves it (Conn.serveFast), read and written atomically.
	fast uint32
}

// Flags of Command.fast.
const (
	fastOnReader = 1 << iota // the fast handler is running on the reader
	fastAnswered             // the fast handler's reply was called
)

// setFast sets flag in c.fast and reports whether it was clear.
func (c *Command) setFast(flag uint32) bool {
	return atomic.OrUint32(&c.fast, flag)&flag == 0
}

// clearFast clears flag in c.fast.
func (c *Command) clearFast(flag uint32) { atomic.AndUint32(&c.fast, ^flag) }

// releaseBody calls ReleaseBody, if set, once.
func (c *Command) releaseBody() {
	if fn := c.ReleaseBody; fn != nil {
		c.ReleaseBody = nil
		fn(c.Body)
	}
}

// NewRequest returns a JSON request with the given code, extFields and body.
// ext and body are used, not copied. The opaque is assigned when the request
// is sent.
func NewRequest(code int16, ext map[string]string, body []byte) *Command {
	return &Command{
		Code:      code,
		Language:  LanguageGo,
		Version:   DefaultVersion,
		ExtFields: ext,
		Body:      body,
	}
}

// NewResponse returns a response to req: it echoes req's opaque, sets
// FlagResponse and uses req's serialization.
func NewResponse(req *Command, code int16, remark string) *Command {
	return &Command{
		Code:          code,
		Language:      LanguageGo,
		Version:       DefaultVersion,
		Opaque:        req.Opaque,
		Flag:          FlagResponse,
		Remark:        remark,
		SerializeType: req.SerializeType,
	}
}

// IsResponse reports whether the command is a response (flag bit 0).
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether the command is a request that wants no response
// (flag bit 1). The Go client never sets it, even for the requests it does
// not wait on.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// String describes the command for logs, without its body.
func (c *Command) String() string {
	kind, name := "request", RequestCode(c.Code).String()
	if c.IsResponse() {
		kind, name = "response", ResponseCode(c.Code).String()
	}
	return fmt.Sprintf("%s %s opaque=%d remark=%q ext=%v body=%dB", kind, name, c.Opaque, c.Remark, c.ext(), len(c.Body))
}

// Get returns the extFields value of key, or "" when absent.
func (c *Command) Get(key string) string { return c.ext()[key] }

// Fields returns the extFields map, building it first when the command
// was decoded without it (a FastHandler's request, a Client's response).
// Code that may see such a command, an Authorize hook say, reads the map
// through Fields rather than ExtFields.
func (c *Command) Fields() map[string]string { return c.ext() }

// ext returns ExtFields, building it first from rawExt or lazyExt when
// the command was decoded or built without it.
func (c *Command) ext() map[string]string {
	if c.hasPairs() {
		c.parseExt()
	}
	return c.ExtFields
}

// hasPairs reports whether the extFields are kept as pairs (rawExt or
// lazyExt), not in ExtFields.
func (c *Command) hasPairs() bool { return c.rawExt != nil || c.lazyExt != "" }

// pairLen returns how many keys and values, alternating, the command
// keeps as pairs.
func (c *Command) pairLen() int {
	if c.lazyExt != "" {
		return (len(c.lazyExt) - c.lazyAt) / 8
	}
	return len(c.rawExt)
}

// pair returns the i-th key or value of the pairs (pairLen).
func (c *Command) pair(i int) string {
	if c.lazyExt == "" {
		return c.rawExt[i]
	}
	at := c.lazyAt + 8*i
	return c.lazyExt[le32(c.lazyExt, at):le32(c.lazyExt, at+4)]
}

// le32 reads the little-endian uint32 at s[at:].
func le32(s string, at int) uint32 {
	_ = s[at+3]
	return uint32(s[at]) | uint32(s[at+1])<<8 | uint32(s[at+2])<<16 | uint32(s[at+3])<<24
}

// parseExt builds ExtFields from the pairs, as DecodeFrame would have; a
// repeated key keeps its last value.
func (c *Command) parseExt() {
	if !c.hasPairs() {
		return
	}
	n := c.pairLen()
	if c.ExtFields == nil {
		c.ExtFields = make(map[string]string, n/2)
	}
	for i := 0; i+1 < n; i += 2 {
		c.ExtFields[c.pair(i)] = c.pair(i + 1)
	}
	c.rawExt, c.lazyExt, c.lazyAt = nil, "", 0
}

// Require returns the extFields value of key, or an error wrapping
// ErrMissingField when it is absent or empty.
func (c *Command) Require(key string) (string, error) {
	v := c.ext()[key]
	if v == "" {
		return "", fmt.Errorf("%w %q", ErrMissingField, key)
	}
	return v, nil
}

// SetFields replaces the extFields with key, value pairs, kept as given
// until something reads them as a map: a response built on the hot path
// is encoded without one. kv is used, not copied; an odd last key is
// dropped.
func (c *Command) SetFields(kv ...string) {
	c.ExtFields, c.rawExt, c.lazyExt, c.lazyAt = nil, kv[:len(kv)&^1], "", 0
}

// Set stores value under key, creating ExtFields if needed.
func (c *Command) Set(key, value string) {
	if c.ext() == nil {
		c.ExtFields = make(map[string]string, 8)
	}
	c.ExtFields[key] = value
}

// SetInt64 stores v under key as decimal text.
func (c *Command) SetInt64(key string, v int64) { c.Set(key, strconv.FormatInt(v, 10)) }

// SetInt32 stores v under key as decimal text.
func (c *Command) SetInt32(key string, v int32) { c.Set(key, strconv.FormatInt(int64(v), 10)) }

// SetBool stores v under key as "true" or "false".
func (c *Command) SetBool(key string, v bool) { c.Set(key, strconv.FormatBool(v)) }

// Int64 parses the extFields value of key as a decimal int64. An absent or
// empty value is an error wrapping ErrMissingField, a bad one an error
// wrapping ErrInvalidField; both name the key.
func (c *Command) Int64(key string) (int64, error) {
	v, err := c.Require(key)
	if err != nil {
		return 0, err
	}
	return parseInt(key, v, 64)
}

// Int32 parses the extFields value of key as a decimal int32, with the
// errors of Int64.
func (c *Command) Int32(key string) (int32, error) {
	v, err := c.Require(key)
	if err != nil {
		return 0, err
	}
	n, err := parseInt(key, v, 32)
	return int32(n), err
}

// Bool parses the extFields value of key as a boolean ("true", "false", and
// the other spellings of strconv.ParseBool), with the errors of Int64.
func (c *Command) Bool(key string) (bool, error) {
	v, err := c.Require(key)
	if err != nil {
		return false, err
	}
	return parseBool(key, v)
}

// Int64Or is Int64 for an optional key: an absent or empty value yields def.
// A value that is present but bad is still an error.
func (c *Command) Int64Or(key string, def int64) (int64, error) {
	v := c.ext()[key]
	if v == "" {
		return def, nil
	}
	return parseInt(key, v, 64)
}

// Int32Or is Int32 for an optional key: an absent or empty value yields def.
func (c *Command) Int32Or(key string, def int32) (int32, error) {
	v := c.ext()[key]
	if v == "" {
		return def, nil
	}
	n, err := parseInt(key, v, 32)
	return int32(n), err
}

// BoolOr is Bool for an optional key: an absent or empty value yields def.
func (c *Command) BoolOr(key string, def bool) (bool, error) {
	v := c.ext()[key]
	if v == "" {
		return def, nil
	}
	return parseBool(key, v)
}

func parseInt(key, v string, bits int) (int64, error) {
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("%w %q: %q is not an int%d", ErrInvalidField, key, v, bits)
	}
	return n, nil
}

func parseBool(key, v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%w %q: %q is not a boolean", ErrInvalidField, key, v)
	}
	return b, nil
}
