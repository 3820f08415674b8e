package wasm

import (
	"bytes"
	"compress/zlib"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/rmq-go/rmq/sdk/abi"
)

// defaultBufferSize holds any batch within the limits: the largest filter
// header and MaxBatchBytes of records, then the largest output.
var defaultBufferSize = uint32(abi.OutOffset(abi.FilterHeaderLen(abi.MaxExpressionLen)+abi.MaxBatchBytes) +
	abi.MaxBatchRecords*abi.TxnResultLen)

// instance is one instantiated module. It serves one call at a time: the
// pool hands it to a single goroutine.
type instance struct {
	mod    api.Module
	mem    api.Memory
	buffer api.Function // broker_buffer
	kindFn api.Function // the kind's function
	stderr *capture

	stack [4]uint64 // reused by every CallWithStack

	buf    uint32 // the guest buffer's address
	bufCap uint32 // its size
	calls  int

	// deadline bounds each call of an untrusted plugin, zero for a trusted
	// one. An instrumented module's calls run under cc, whose deadline its
	// interruption checks compare with the clock; otherwise timer closes
	// the module when it passes, which stops the running code at wazero's
	// next interruption check.
	deadline time.Duration
	cc       *callContext
	timer    *time.Timer

	records []abi.FilterRecord        // scratch for one filter batch
	props   []byte                    // scratch for the batch's projected properties and inflated bodies
	vals    [abi.MaxFilterKeys][]byte // scratch for resolving one record's property values

	zr   io.ReadCloser // inflates bodies for filters that ask; reset per body
	zsrc bytes.Reader
}

// maxInflatedBody bounds a body the host inflates for a filter: one that
// inflates past it is sent as stored, compressed, so a small body built to
// inflate enormously costs the broker at most this much memory.
const maxInflatedBody = 4 << 20

// inflate appends the zlib stream src, inflated, to dst. ok is false (and
// dst as it was) for a stream that is corrupt or inflates past
// maxInflatedBody.
func (inst *instance) inflate(dst, src []byte) (_ []byte, ok bool) {
	inst.zsrc.Reset(src)
	if inst.zr == nil {
		zr, err := zlib.NewReader(&inst.zsrc)
		if err != nil {
			return dst, false
		}
		inst.zr = zr
	} else if err := inst.zr.(zlib.Resetter).Reset(&inst.zsrc, nil); err != nil {
		return dst, false
	}
	start := len(dst)
	for {
		if len(dst) == cap(dst) {
			dst = append(dst, 0)[:len(dst)]
		}
		n, err := inst.zr.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		switch {
		case len(dst)-start > maxInflatedBody:
			return dst[:start], false
		case err == io.EOF:
			return dst, true
		case err != nil:
			return dst[:start], false
		}
	}
}

// callError is a failed call, classified.
type callError struct {
	err      error // wraps ErrTrap or ErrTimeout
	timeout  bool
	poisoned bool // the instance must be discarded
	stderr   string
}

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// watch arms the instance's deadline: each call from now on must finish
// within d.
func (in *instance) watch(d time.Duration) {
	in.deadline = d
	mod := in.mod
	in.timer = time.AfterFunc(time.Hour, func() {
		_ = mod.CloseWithExitCode(context.Background(), sys.ExitCodeDeadlineExceeded)
	})
	in.timer.Stop()
}

// callContext is the context an instrumented module's calls run under:
// its deadline is the running call's, set afresh for each call without
// allocating. It is used by the goroutine making the call alone.
type callContext struct {
	context.Context           // Background for calls, the caller's while instantiating
	at              time.Time // the deadline
}

// Deadline returns the running call's deadline.
func (c *callContext) Deadline() (time.Time, bool) { return c.at, true }

// sleep is the module's nanosleep: it sleeps no further than the deadline,
// so a guest that sleeps in a loop reaches its next interruption check
// once the deadline passes rather than a full sleep later.
func (c *callContext) sleep(ns int64) {
	time.Sleep(min(time.Duration(ns), time.Until(c.at)))
}

// call runs fn with the instance's stack, whose first entries the caller
// set. A failure poisons the instance: wazero leaves a module that trapped
// or was interrupted in no state to serve again.
//
// An untrusted call of an instrumented module is bounded by the instance's
// reused callContext, which its interruption checks read; of any other
// untrusted module, by a reused timer rather than a context with a
// deadline, which would cost wazero a goroutine per call.
func (in *instance) call(ctx context.Context, fn api.Function) error {
	in.calls++
	in.stderr.reset()
	if in.cc != nil {
		in.cc.at = time.Now().Add(in.deadline)
		ctx = in.cc
	}
	if in.timer != nil {
		in.timer.Reset(in.deadline)
	}
	err := fn.CallWithStack(ctx, in.stack[:])
	if in.timer != nil && !in.timer.Stop() && err == nil {
		// The deadline passed as the call returned: the module is being
		// closed, so its results cannot be trusted.
		err = sys.NewExitError(sys.ExitCodeDeadlineExceeded)
	}
	if err == nil {
		return nil
	}
	ce := &callError{poisoned: true, stderr: in.stderr.String()}
	var exit *sys.ExitError
	switch {
	case errors.As(err, &exit) && (exit.ExitCode() == sys.ExitCodeDeadlineExceeded || exit.ExitCode() == sys.ExitCodeContextCanceled):
		ce.timeout = true
		ce.err = wrapf(ErrTimeout, "%s: %v", fn.Definition().Name(), err)
	case errors.As(err, &exit):
		ce.err = wrapf(ErrTrap, "%s: module exited with code %d", fn.Definition().Name(), exit.ExitCode())
	default:
		// wazero appends a wasm stack trace; the guest's own stderr says more.
		msg, _, _ := strings.Cut(err.Error(), "\n")
		ce.err = wrapf(ErrTrap, "%s: %s", fn.Definition().Name(), msg)
	}
	return ce
}

// ensureBuffer makes the guest buffer hold at least n bytes.
func (in *instance) ensureBuffer(ctx context.Context, n uint32) error {
	if n <= in.bufCap {
		return nil
	}
	in.stack[0] = api.EncodeU32(n)
	if err := in.call(ctx, in.buffer); err != nil {
		return err
	}
	ptr := api.DecodeU32(in.stack[0])
	if ptr == 0 || uint64(ptr)+uint64(n) > uint64(in.mem.Size()) {
		return wrapf(ErrOutput, "broker_buffer(%d) returned %#x, outside the module's %d bytes of memory", n, ptr, in.mem.Size())
	}
	in.buf, in.bufCap = ptr, n
	return nil
}

// view returns n bytes of the guest buffer from off. The view is valid until
// the next call, which may grow (and move) the memory.
func (in *instance) view(off, n uint32) []byte {
	b, ok := in.mem.Read(in.buf+off, n)
	if !ok {
		// ensureBuffer checked the bounds and memory never shrinks.
		panic(fmt.Sprintf("wasm: guest buffer %#x+%d outside memory", in.buf+off, n))
	}
	return b[:n:n]
}

// guestError reads the message a non-OK status left in the buffer.
func (in *instance) guestError(s abi.Status) error {
	msg := abi.ReadError(in.view(0, min(in.bufCap, 4+abi.MaxErrorLen)))
	var sentinel error
	switch s {
	case abi.StatusNotImplemented:
		sentinel = ErrKind
	case abi.StatusBadExpression:
		sentinel = ErrExpression
	case abi.StatusBadConfig:
		sentinel = ErrInit
	case abi.StatusFailed, abi.StatusBadInput:
		sentinel = ErrFailed
	default:
		return wrapf(ErrOutput, "unknown status %d", s)
	}
	return wrapf(sentinel, "%v: %s", s, msg)
}

// init passes the plugin's config to broker_init.
func (in *instance) init(ctx context.Context, fn api.Function, config []byte) error {
	if err := in.ensureBuffer(ctx, uint32(max(len(config), 4+abi.MaxErrorLen))); err != nil {
		return err
	}
	copy(in.view(0, uint32(len(config))), config)
	in.stack[0], in.stack[1] = api.EncodeU32(in.buf), api.EncodeU32(uint32(len(config)))
	if err := in.call(ctx, fn); err != nil {
		return err
	}
	if s := abi.Status(api.DecodeI32(in.stack[0])); s != abi.StatusOK {
		return in.guestError(s)
	}
	return nil
}

// packed calls a () → i64 export returning PackPtrLen and copies the bytes
// it points at, at most limit of them.
func (in *instance) packed(ctx context.Context, fn api.Function, limit uint32) ([]byte, error) {
	if err := in.call(ctx, fn); err != nil {
		return nil, err
	}
	v := int64(in.stack[0])
	if v == 0 {
		return nil, nil
	}
	ptr, n := abi.UnpackPtrLen(v)
	if n > limit {
		return nil, wrapf(ErrOutput, "%s returned %d bytes, more than %d", fn.Definition().Name(), n, limit)
	}
	b, ok := in.mem.Read(ptr, n)
	if !ok {
		return nil, wrapf(ErrOutput, "%s returned %#x+%d, outside memory", fn.Definition().Name(), ptr, n)
	}
	return append([]byte(nil), b...), nil
}

// packedCall calls an (in, len) → i64 export over the inLen input bytes in
// the buffer; the result is PackPtrLen of bytes it copies (nil for 0) or a
// negated status.
func (in *instance) packedCall(ctx context.Context, fn api.Function, inLen uint32) ([]byte, error) {
	in.stack[0], in.stack[1] = api.EncodeU32(in.buf), api.EncodeU32(inLen)
	if err := in.call(ctx, fn); err != nil {
		return nil, err
	}
	v := int64(in.stack[0])
	if v < 0 {
		return nil, in.guestError(abi.Status(-v))
	}
	if v == 0 {
		return nil, nil
	}
	ptr, n := abi.UnpackPtrLen(v)
	b, ok := in.mem.Read(ptr, n)
	if !ok || n > abi.MaxBatchBytes {
		return nil, wrapf(ErrOutput, "%s returned %#x+%d, outside memory or too long", fn.Definition().Name(), ptr, n)
	}
	return append([]byte(nil), b...), nil
}

// batch runs a filter or txn-check call over the inLen input bytes already
// in the buffer, with outLen zeroed output bytes after them, and returns
// the output.
func (in *instance) batch(ctx context.Context, inLen, count, outLen uint32) ([]byte, error) {
	outOff := uint32(abi.OutOffset(int(inLen)))
	clear(in.view(outOff, outLen))
	in.stack[0], in.stack[1], in.stack[2], in.stack[3] =
		api.EncodeU32(in.buf), api.EncodeU32(inLen), api.EncodeU32(count), api.EncodeU32(in.buf+outOff)
	if err := in.call(ctx, in.kindFn); err != nil {
		return nil, err
	}
	if s := abi.Status(api.DecodeI32(in.stack[0])); s != abi.StatusOK {
		return nil, in.guestError(s)
	}
	return in.view(outOff, outLen), nil
}

// allocate runs broker_allocate over the inLen input bytes in the buffer
// and returns the indices' bytes, copied.
func (in *instance) allocate(ctx context.Context, inLen uint32, queues int) ([]byte, error) {
	in.stack[0], in.stack[1] = api.EncodeU32(in.buf), api.EncodeU32(inLen)
	if err := in.call(ctx, in.kindFn); err != nil {
		return nil, err
	}
	v := int64(in.stack[0])
	if v < 0 {
		return nil, in.guestError(abi.Status(-v))
	}
	ptr, n := abi.UnpackPtrLen(v)
	if uint64(n) > uint64(queues) {
		return nil, wrapf(ErrOutput, "broker_allocate returned %d indices for %d queues", n, queues)
	}
	if n == 0 {
		return nil, nil
	}
	b, ok := in.mem.Read(ptr, n*4)
	if !ok {
		return nil, wrapf(ErrOutput, "broker_allocate returned %#x+%d, outside memory", ptr, n*4)
	}
	return append([]byte(nil), b...), nil
}

// close releases the instance's module.
func (in *instance) close(ctx context.Context) {
	if in.timer != nil {
		in.timer.Stop()
	}
	_ = in.mod.Close(ctx)
}
