// Command abiminor is a module of ABI v1 built for a later minor revision
// than any host speaks: its info block reports v1.999, which the host must
// refuse, since such a guest may count on what an older host does not do.
package main

import (
	"unsafe"

	"github.com/rmq-go/rmq/sdk/abi"
)

var (
	buf  = make([]byte, 1<<10)
	info = abi.AppendInfo(nil, abi.Info{Version: abi.Version, Minor: 999, Kinds: abi.KindFilter})
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

//go:wasmexport broker_filter
func filter(in unsafe.Pointer, n, count uint32, out unsafe.Pointer) int32 { return 0 }

func main() {}
