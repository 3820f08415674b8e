package inflate_test

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/internal/inflate"
)

// compressed returns body compressed as a producer does for the type.
func compressed(t testing.TB, typ int32, body []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	switch typ {
	case 0, message.SysFlagCompressionZlib:
		w := zlib.NewWriter(&buf)
		w.Write(body)
		w.Close()
	case message.SysFlagCompressionZstd:
		w, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(body)
		w.Close()
	case message.SysFlagCompressionLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(body)
		w.Close()
	case -1: // gzip
		w := gzip.NewWriter(&buf)
		w.Write(body)
		w.Close()
	}
	return buf.Bytes()
}

// TestBody: each compression type a RocketMQ producer sets comes back
// whole within its limit, and a body larger than the limit (a bomb) is
// an error, never a body cut short.
func TestBody(t *testing.T) {
	body := bytes.Repeat([]byte("rocketmq "), 10000)
	for _, typ := range []int32{0, message.SysFlagCompressionZlib, message.SysFlagCompressionZstd, message.SysFlagCompressionLZ4} {
		z := compressed(t, typ, body)
		flag := message.SysFlagCompressed | typ
		got, err := inflate.Body(flag, z, len(body))
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("type %d: %d bytes, %v; want the %d bytes sent", typ>>8, len(got), err, len(body))
		}
		if got, err := inflate.Body(flag, z, len(body)-1); !errors.Is(err, inflate.ErrInflatedTooLarge) || got != nil {
			t.Fatalf("type %d over its limit: %d bytes, %v; want ErrInflatedTooLarge", typ>>8, len(got), err)
		}
		if _, err := inflate.Body(flag, z[:len(z)/2], len(body)); err == nil {
			t.Fatalf("type %d: a truncated body decompressed without an error", typ>>8)
		}
	}
	if _, err := inflate.Body(message.SysFlagCompressed|0x4<<8, compressed(t, 0, body), len(body)); err == nil {
		t.Fatal("an unknown compression type decompressed")
	}
}

// TestGunzip: a 5.x client's GZIP body is gzip, or zlib (the C++
// client's), told apart by their first bytes.
func TestGunzip(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 5000)
	for name, z := range map[string][]byte{"gzip": compressed(t, -1, body), "zlib": compressed(t, 0, body)} {
		got, err := inflate.Gunzip(z, len(body))
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%s: %d bytes, %v", name, len(got), err)
		}
		if _, err := inflate.Gunzip(z, len(body)-1); !errors.Is(err, inflate.ErrInflatedTooLarge) {
			t.Fatalf("%s over its limit: %v", name, err)
		}
	}
	for _, bad := range [][]byte{nil, {0x1f}, []byte("plain text"), compressed(t, message.SysFlagCompressionZstd, body)} {
		if _, err := inflate.Gunzip(bad, 1<<20); err == nil {
			t.Fatalf("%q decompressed as gzip", bad)
		}
	}
}

// FuzzBody: any body under any compression type decompresses to at
// most its limit or fails; nothing panics.
func FuzzBody(f *testing.F) {
	body := bytes.Repeat([]byte("ab"), 300)
	for _, typ := range []int32{0, message.SysFlagCompressionZstd, message.SysFlagCompressionLZ4} {
		f.Add(typ>>8, compressed(f, typ, body))
	}
	f.Add(int32(-1), compressed(f, -1, body))
	f.Fuzz(func(t *testing.T, typ int32, z []byte) {
		const limit = 4096
		var got []byte
		var err error
		if typ < 0 {
			got, err = inflate.Gunzip(z, limit)
		} else {
			got, err = inflate.Body(message.SysFlagCompressed|(typ&7)<<8, z, limit)
		}
		if err == nil && len(got) > limit {
			t.Fatalf("%d bytes out, over the limit of %d", len(got), limit)
		}
	})
}
