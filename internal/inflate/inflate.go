// Package inflate decompresses message bodies: those 4.x producers
// stored compressed (core/message.SysFlagCompressed, zlib, or zstd or LZ4
// from a Java producer told to), and the GZIP bodies of RocketMQ 5
// clients. Every function takes a limit and fails past it rather than
// return a body cut short, so a decompression bomb costs at most the
// limit. It is apart from core/message, which the client and WASM guests
// build on the standard library alone.
package inflate

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/rmq-go/rmq/core/message"
)

// ErrInflatedTooLarge is returned by Inflate for a body that decompresses
// to more than its limit.
var ErrInflatedTooLarge = errors.New("inflate: decompressed body exceeds the limit")

// Body decompresses a body stored with SysFlagCompressed, by the
// compression type sysFlag names, into at most limit bytes: a body that
// would be larger is ErrInflatedTooLarge, never cut short, and so is a
// decompression bomb.
func Body(sysFlag int32, body []byte, limit int) ([]byte, error) {
	var r io.Reader
	switch t := sysFlag & message.SysFlagCompressionMask; t {
	case 0, message.SysFlagCompressionZlib:
		zr, err := zlib.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("inflate: zlib body: %w", err)
		}
		defer zr.Close()
		r = zr
	case message.SysFlagCompressionZstd:
		zr, err := zstd.NewReader(bytes.NewReader(body), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(limit)+1))
		if err != nil {
			return nil, fmt.Errorf("inflate: zstd body: %w", err)
		}
		defer zr.Close()
		r = zr
	case message.SysFlagCompressionLZ4:
		r = lz4.NewReader(bytes.NewReader(body))
	default:
		return nil, fmt.Errorf("inflate: unknown compression type %d", t>>8)
	}
	return readLimited(r, limit)
}

// Gunzip decompresses a body a RocketMQ 5 client sent as GZIP into at
// most limit bytes. It takes a zlib stream too, by its first bytes, as
// every client's decoder does: the C++ client compresses with zlib and
// labels the body GZIP.
func Gunzip(body []byte, limit int) ([]byte, error) {
	var r io.Reader
	switch {
	case len(body) >= 2 && body[0] == 0x1f && body[1] == 0x8b:
		gr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		defer gr.Close()
		r = gr
	case len(body) >= 2 && body[0]&0x0f == 8 && (uint16(body[0])<<8|uint16(body[1]))%31 == 0:
		// A zlib header: deflate, and a check that makes it a multiple of 31.
		zr, err := zlib.NewReader(bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	default:
		return nil, errors.New("neither gzip nor zlib")
	}
	return readLimited(r, limit)
}

func readLimited(r io.Reader, limit int) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(out) > limit {
		return nil, fmt.Errorf("%w (%d bytes)", ErrInflatedTooLarge, limit)
	}
	return out, nil
}
