package remoting

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
)

// DefaultMaxFrameSize is the largest frame accepted when no limit is
// configured: 16 MiB counted after the length prefix.
const DefaultMaxFrameSize = 16 << 20

// MaxHeaderSize is the largest header a frame can carry: its length field
// has 24 bits. A handler whose response header grows with its input (a
// batch's message ids in one extFields value) must keep the input small
// enough, or its response is answered with ResponseNotEncodable instead.
const MaxHeaderSize = 1<<24 - 1

// maxHeaderLen is the 24-bit header length field's mask.
const maxHeaderLen = MaxHeaderSize

// frameHeadLen is the length prefix plus the type/header-length word.
const frameHeadLen = 8

// AppendFrame appends c as one whole frame to dst: the length prefix, the
// serialization type and header length, the header in c.SerializeType and
// the body. On error dst is returned unchanged.
func AppendFrame(dst []byte, c *Command) ([]byte, error) {
	dst, err := appendFrameHead(dst, c)
	if err != nil {
		return dst, err
	}
	return append(dst, c.Body...), nil
}

// appendFrameHead appends everything of c's frame but the body; the length
// prefix already counts the body.
func appendFrameHead(dst []byte, c *Command) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	var err error
	switch c.SerializeType {
	case SerializeJSON:
		dst = appendJSONHeader(dst, c)
	case SerializeRocketMQ:
		dst, err = appendBinaryHeader(dst, c)
	default:
		err = fmt.Errorf("remoting: cannot encode serialization type %d", c.SerializeType)
	}
	if err != nil {
		return dst[:start], err
	}
	headerLen := len(dst) - start - frameHeadLen
	if headerLen > maxHeaderLen {
		return dst[:start], fmt.Errorf("%w: header of %d bytes", ErrFrameTooLarge, headerLen)
	}
	total := 4 + headerLen + len(c.Body)
	if total > math.MaxInt32 {
		return dst[:start], fmt.Errorf("%w: frame of %d bytes", ErrFrameTooLarge, total)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(total))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(c.SerializeType)<<24|uint32(headerLen))
	return dst, nil
}

// DecodeFrame decodes one frame, given without its 4-byte length prefix, into
// c, replacing all of c's fields. c.Body aliases frame; the header's strings
// do not. A non-nil c.ExtFields map is cleared and reused. Errors wrap
// ErrMalformed.
func DecodeFrame(frame []byte, c *Command) error { return decodeFrame(frame, c, nil) }

// decodeFrame is DecodeFrame; a JSON command that lazy (given the command
// decoded so far) reports true for keeps its extFields as pairs
// (Command.lazyExt) instead of a map.
func decodeFrame(frame []byte, c *Command, lazy func(*Command) bool) error {
	m := c.ExtFields
	clear(m)
	*c = Command{}
	if len(frame) < 4 {
		return malformed("frame of %d bytes has no header length", len(frame))
	}
	word := binary.BigEndian.Uint32(frame)
	st, headerLen := byte(word>>24), int(word&maxHeaderLen)
	if headerLen > len(frame)-4 {
		return malformed("header length %d exceeds the %d bytes left in the frame", headerLen, len(frame)-4)
	}
	header := frame[4 : 4+headerLen]
	var err error
	switch st {
	case SerializeJSON:
		err = decodeJSONHeader(header, c, m, lazy)
	case SerializeRocketMQ:
		err = decodeBinaryHeader(header, c, m)
	default:
		err = malformed("unknown serialization type %d", st)
	}
	if err != nil {
		return err
	}
	c.SerializeType = st
	if body := frame[4+headerLen:]; len(body) > 0 {
		c.Body = body
	}
	return nil
}

// ReadFrame reads one frame from r and returns it without its length
// prefix, ready for DecodeFrame. The frame is read into buf when it fits,
// else into a new slice. A length above maxFrame (≤ 0 means
// DefaultMaxFrameSize) is an error wrapping ErrFrameTooLarge, one below 4
// wraps ErrMalformed; neither reads the frame, so the stream cannot go on.
// A stream that ends cleanly between frames returns io.EOF, one that ends
// inside a frame io.ErrUnexpectedEOF.
func ReadFrame(r *bufio.Reader, maxFrame int, buf []byte) ([]byte, error) {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrameSize
	}
	p, err := r.Peek(4)
	if err != nil {
		if err == io.EOF && len(p) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	n := int64(int32(binary.BigEndian.Uint32(p)))
	_, _ = r.Discard(4)
	if n < 4 {
		return nil, malformed("frame length %d is below 4", n)
	}
	if n > int64(maxFrame) {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, n, maxFrame)
	}
	if int64(cap(buf)) >= n {
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, unexpectedEOF(err)
		}
		return buf, nil
	}
	// Grow with the bytes that actually arrive, so a length prefix alone
	// cannot make the reader allocate up to maxFrame.
	size := int(n)
	buf = buf[:0]
	for len(buf) < size {
		chunk := min(size-len(buf), max(len(buf), readChunk))
		buf = slices.Grow(buf, chunk)
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+chunk])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, unexpectedEOF(err)
		}
	}
	return buf, nil
}

// readChunk is the first allocation for a frame that does not fit the
// caller's buffer; the buffer then doubles as bytes arrive.
const readChunk = 64 << 10

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
