// Command abiold is a filter module built for ABI v1.1, before transforms:
// its info block reports minor 1 and it exports no broker_transform. A
// host of a later minor must still load it as a filter.
package main

import (
	"unsafe"

	"github.com/rmq-go/rmq/sdk/abi"
)

var (
	buf  = make([]byte, 1<<10)
	info = abi.AppendInfo(nil, abi.Info{Version: abi.Version, Minor: 1, Kinds: abi.KindFilter})
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
func brokerInfo() int64 {
	return abi.PackPtrLen(uint32(uintptr(unsafe.Pointer(&info[0]))), uint32(len(info)))
}

// filter matches every record.
//
//go:wasmexport broker_filter
func filter(in unsafe.Pointer, n, count uint32, out unsafe.Pointer) int32 {
	res := unsafe.Slice((*byte)(out), count)
	for i := range res {
		res[i] = abi.FilterMatch
	}
	return 0
}

func main() {}
