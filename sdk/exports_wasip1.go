//go:build wasip1

package sdk

import (
	"unsafe"

	"github.com/rmq-go/rmq/sdk/abi"
)

// The module's exports. Every module that imports this package has all of
// them; broker_info tells the host which kinds are registered, and the
// functions of the other kinds answer StatusNotImplemented.

//go:wasmexport broker_abi_v1
func exportMarker() {}

//go:wasmexport broker_buffer
func exportBuffer(size uint32) unsafe.Pointer {
	return unsafe.Pointer(unsafe.SliceData(buffer(size)))
}

//go:wasmexport broker_init
func exportInit(ptr unsafe.Pointer, n uint32) int32 {
	return int32(runInit(unsafe.Slice((*byte)(ptr), n)))
}

//go:wasmexport broker_info
func exportInfo() int64 { return packSlice(infoBlock()) }

//go:wasmexport broker_filter
func exportFilter(in unsafe.Pointer, n, count uint32, out unsafe.Pointer) int32 {
	return int32(runFilter(unsafe.Slice((*byte)(in), n), count, unsafe.Slice((*byte)(out), count)))
}

//go:wasmexport broker_filter_keys
func exportFilterKeys(in unsafe.Pointer, n uint32) int64 {
	keys, s := runFilterKeys(unsafe.Slice((*byte)(in), n))
	if s != abi.StatusOK {
		return -int64(s)
	}
	return packSlice(keys)
}

//go:wasmexport broker_allocate
func exportAllocate(in unsafe.Pointer, n uint32) int64 {
	out, s := runAllocate(unsafe.Slice((*byte)(in), n))
	if s != abi.StatusOK {
		return -int64(s)
	}
	if len(out) == 0 {
		return 0
	}
	return abi.PackPtrLen(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(out)))), uint32(len(out)/4))
}

//go:wasmexport broker_txn_check
func exportTxnCheck(in unsafe.Pointer, n, count uint32, out unsafe.Pointer) int32 {
	return int32(runTxnCheck(unsafe.Slice((*byte)(in), n), count, unsafe.Slice((*byte)(out), count*abi.TxnResultLen)))
}

//go:wasmexport broker_transform
func exportTransform(in unsafe.Pointer, n uint32) int64 {
	out, s := runTransform(unsafe.Slice((*byte)(in), n))
	if s != abi.StatusOK {
		return -int64(s)
	}
	return packSlice(out)
}

//go:wasmexport broker_selftest
func exportSelfTest() int64 { return packSlice(selfTests()) }

// packSlice packs b's address and length for the host. b stays referenced
// by state, so the address remains valid until the next call.
func packSlice(b []byte) int64 {
	if len(b) == 0 {
		return 0
	}
	return abi.PackPtrLen(uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), uint32(len(b)))
}

//go:wasmimport broker_v1 log
func importLog(level int32, ptr unsafe.Pointer, n uint32)

func hostLog(level Level, msg string) {
	importLog(int32(level), unsafe.Pointer(unsafe.StringData(msg)), uint32(len(msg)))
}
