// Command abiv2 is a module built for a later ABI: it has every function of
// v1 but the v2 marker, which the host must refuse by name.
package main

import "unsafe"

var buf = make([]byte, 1<<10)

//go:wasmexport broker_abi_v2
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

//go:wasmexport broker_filter
func filter(in unsafe.Pointer, n, count uint32, out unsafe.Pointer) int32 { return 0 }

func main() {}
