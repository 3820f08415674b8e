// Command badtransform is a transform module whose results break the ABI:
// for a body "short" it returns a result shorter than its header, for
// "range" a result past the end of memory, and for "reject-change" a reject
// that also changes the topic. Any other message passes.
package main

import (
	"unsafe"

	"github.com/rmq-go/rmq/sdk/abi"
)

var (
	buf  = make([]byte, 1<<10)
	out  []byte
	info = abi.AppendInfo(nil, abi.Info{Version: abi.Version, Minor: 2, Kinds: abi.KindTransform})
)

//go:wasmexport broker_abi_v1
func marker() {}

//go:wasmexport broker_buffer
func buffer(size uint32) unsafe.Pointer {
	if int(size) > len(buf) {
		buf = make([]byte, size)
	}
	return unsafe.Pointer(&buf[0])
}

//go:wasmexport broker_init
func initConfig(ptr unsafe.Pointer, n uint32) int32 { return 0 }

//go:wasmexport broker_info
func brokerInfo() int64 { return pack(info) }

func pack(b []byte) int64 {
	return abi.PackPtrLen(uint32(uintptr(unsafe.Pointer(&b[0]))), uint32(len(b)))
}

//go:wasmexport broker_transform
func transform(in unsafe.Pointer, n uint32) int64 {
	var r abi.TransformRecord
	if abi.ReadTransformRecord(unsafe.Slice((*byte)(in), n), &r) != nil {
		return -int64(abi.StatusBadInput)
	}
	switch string(r.Body) {
	case "short":
		out = []byte{1, 0, 0, 0}
		return pack(out)
	case "range":
		return abi.PackPtrLen(0x7FFF0000, 64)
	case "reject-change":
		// A reject may not change the topic.
		out = abi.AppendTransformResult(out[:0], &abi.TransformResult{Action: abi.TransformReject, Topic: []byte("x"), Reason: []byte("no")})
		return pack(out)
	}
	return 0
}

func main() {}
