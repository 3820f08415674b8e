package abi

import (
	"encoding/binary"
	"errors"
)

// Version is the major ABI version this package defines. A module speaks
// it when it exports ExportMarker. Minor is the revision within it; a host
// accepts a guest of its own major whose minor is at most its own (see the
// package doc, "Versions").
const (
	Version = 1
	Minor   = 4 // 1: FlagFilterBodyInflated; 2: KindTransform; 3: transform self-tests; 4: FlagFilterValues
)

// Names a module exports. Every function listed here is optional except
// ExportMarker, ExportBuffer, ExportInit and the function of each kind the
// module is loaded for.
const (
	// ExportMarker marks a module built for ABI v1. It is a function that is
	// never called.
	ExportMarker = "broker_abi_v1"
	// MarkerPrefix starts the marker of every ABI version, so a host can name
	// the version a foreign module was built for.
	MarkerPrefix = "broker_abi_v"
	// ExportMemory is the module's linear memory.
	ExportMemory = "memory"
	// ExportInitialize is the reactor's initializer (Go's runtime and init
	// functions). The host calls it once, before anything else. A module
	// that imports WASI must export it.
	ExportInitialize = "_initialize"
	// ExportStart marks a WASI command module, which this ABI does not
	// load. A module without WASI imports (AssemblyScript's output) may
	// export it instead of ExportInitialize, or neither when its start
	// section initializes it; the host then calls it in the same place.
	ExportStart = "_start"
	// ExportBuffer is broker_buffer(size i32) → ptr i32: a guest-owned
	// buffer of at least size bytes, reused by every call until the host asks
	// for a larger one.
	ExportBuffer = "broker_buffer"
	// ExportInit is broker_init(ptr i32, len i32) → status i32: the plugin's
	// config bytes, once per instance, before any other call.
	ExportInit = "broker_init"
	// ExportInfo is broker_info() → i64: PackPtrLen of an info block.
	ExportInfo = "broker_info"
	// ExportFilter is broker_filter(in i32, len i32, count i32, out i32) →
	// status i32: one filter batch.
	ExportFilter = "broker_filter"
	// ExportFilterKeys is broker_filter_keys(in i32, len i32) → i64: for the
	// expression in a filter batch header, 0 if the filter reads every
	// property, PackPtrLen of a key list if it reads only those, or the
	// negated status (a rejected expression).
	ExportFilterKeys = "broker_filter_keys"
	// ExportAllocate is broker_allocate(in i32, len i32) → i64: PackPtrLen of
	// the assigned queue indices, or the negated status.
	ExportAllocate = "broker_allocate"
	// ExportTxnCheck is broker_txn_check(in i32, len i32, count i32, out i32)
	// → status i32: one batch of half messages.
	ExportTxnCheck = "broker_txn_check"
	// ExportTransform (ABI v1.2) is broker_transform(in i32, len i32) →
	// i64: for one transform record, 0 to pass the message unchanged,
	// PackPtrLen of a transform result, or the negated status.
	ExportTransform = "broker_transform"
	// ExportSelfTest is broker_selftest() → i64: PackPtrLen of the module's
	// self-test vectors.
	ExportSelfTest = "broker_selftest"
)

// Names the host provides in module ImportModule.
const (
	// ImportModule is the host module every broker import lives in.
	ImportModule = "broker_v1"
	// ImportLog is log(level i32, ptr i32, len i32): one log line at a
	// log/slog level.
	ImportLog = "log"
	// ImportNowMs is now_ms() → i64: the broker's wall clock in ms.
	ImportNowMs = "now_ms"
)

// Limits of one call.
const (
	// MaxBatchRecords is the most records (or half messages) in one call.
	MaxBatchRecords = 256
	// MaxBatchBytes is the most input bytes in one call, unless a single
	// record is larger: such a record travels alone.
	MaxBatchBytes = 256 << 10
	// MaxExpressionLen is the longest filter expression.
	MaxExpressionLen = 4096
	// MaxErrorLen is the longest error message a guest leaves for the host.
	MaxErrorLen = 1024
	// MaxInfoLen is the longest info block.
	MaxInfoLen = 4096
	// MaxSelfTestLen is the longest self-test blob.
	MaxSelfTestLen = 1 << 20
	// MaxAllocateLen is the longest broker_allocate input.
	MaxAllocateLen = 4 << 20
	// MaxFilterKeys is the most property keys a filter can name.
	MaxFilterKeys = 64
)

// Kinds is a set of extension kinds a module serves.
type Kinds uint8

// The extension kinds.
const (
	KindFilter    Kinds = 1 << iota // broker_filter
	KindAllocate                    // broker_allocate
	KindTxnCheck                    // broker_txn_check
	KindTransform                   // broker_transform (ABI v1.2)
)

// Has reports whether k includes all of o.
func (k Kinds) Has(o Kinds) bool { return k&o == o }

// Flags qualify what a module wants from the host.
type Flags uint8

// The info flags.
const (
	// FlagFilterBody asks for message bodies in filter batches.
	FlagFilterBody Flags = 1 << iota
	// FlagFilterBodyInflated (with FlagFilterBody; ABI v1.1) asks the host
	// to inflate zlib-compressed bodies before it sends them, clearing the
	// record's compressed SysFlag bit. A body that does not inflate, or
	// inflates past the host's limit, is sent as stored with the bit set.
	FlagFilterBodyInflated
	// FlagFilterValues (ABI v1.4) asks the host to resolve the properties
	// a filter names through broker_filter_keys: in the batches of such an
	// expression, each record's properties field holds the value of each
	// named key, in the order named (see AppendFilterValue), instead of
	// the pieces of the properties string. Expressions for which
	// broker_filter_keys answers 0 (every property) are not affected.
	FlagFilterValues
)

// Has reports whether f includes all of o.
func (f Flags) Has(o Flags) bool { return f&o == o }

// Status is the i32 a guest function returns. Any value but StatusOK leaves
// an error message in the guest buffer (see PutError).
type Status int32

// The statuses.
const (
	StatusOK             Status = 0 // done; outputs are written
	StatusNotImplemented Status = 1 // the module does not serve this kind
	StatusBadInput       Status = 2 // the input does not follow the layout
	StatusBadExpression  Status = 3 // the filter expression was rejected
	StatusBadConfig      Status = 4 // broker_init rejected the config
	StatusFailed         Status = 5 // the plugin's code returned an error
)

var statusNames = [...]string{"ok", "not implemented", "bad input", "bad expression", "bad config", "failed"}

// String names s.
func (s Status) String() string {
	if s >= 0 && int(s) < len(statusNames) {
		return statusNames[s]
	}
	return "unknown status"
}

// Filter result bytes, one per record at out.
const (
	FilterUnset   = 0 // not written: the host treats it as an error
	FilterNoMatch = 1 // the record does not match
	FilterMatch   = 2 // the record matches
)

// TxnAction is what a transaction-check policy decides for a half message.
type TxnAction uint32

// The transaction actions.
const (
	TxnUnset    TxnAction = 0 // not written: the host treats it as an error
	TxnCheckNow TxnAction = 1 // ask the producer for the transaction's state now
	TxnWait     TxnAction = 2 // decide again after the given wait
	TxnCommit   TxnAction = 3 // commit without asking
	TxnRollback TxnAction = 4 // roll back without asking
	TxnDiscard  TxnAction = 5 // give up on the message (RocketMQ's discard)
)

// TxnResultLen is the size of one transaction-check result at out.
const TxnResultLen = 8

// BodyAbsent is the body length of a filter record sent without its body.
const BodyAbsent = 0xFFFFFFFF

// ErrLayout is returned by every decoder in this package for bytes that do
// not hold the layout they claim to.
var ErrLayout = errors.New("abi: malformed layout")

var le = binary.LittleEndian

// PackPtrLen packs a guest pointer and a length into the i64 returned by
// broker_info, broker_allocate and broker_selftest. ptr must be below 2 GiB,
// which the host's memory limit guarantees, so a packed value is never
// negative.
func PackPtrLen(ptr, n uint32) int64 { return int64(uint64(ptr)<<32 | uint64(n)) }

// UnpackPtrLen splits a value made by PackPtrLen.
func UnpackPtrLen(v int64) (ptr, n uint32) { return uint32(uint64(v) >> 32), uint32(v) }

// OutOffset is where the host places a call's output in the guest buffer:
// after inLen bytes of input, rounded up to 8.
func OutOffset(inLen int) int { return (inLen + 7) &^ 7 }

// PutError writes msg at the start of buf as an error message (u32 length,
// then the text, cut to MaxErrorLen and to what buf holds).
func PutError(buf []byte, msg string) {
	if len(buf) < 4 {
		return
	}
	n := min(len(msg), MaxErrorLen, len(buf)-4)
	le.PutUint32(buf, uint32(n))
	copy(buf[4:], msg[:n])
}

// ReadError reads the message PutError left at the start of buf. A length
// that does not fit yields what fits.
func ReadError(buf []byte) string {
	if len(buf) < 4 {
		return ""
	}
	n := min(int(le.Uint32(buf)), MaxErrorLen, len(buf)-4)
	return string(buf[4 : 4+n])
}

// Info is the info block broker_info describes.
type Info struct {
	// Version is the ABI version the module was built for.
	Version uint16
	// Kinds are the extension kinds the module serves.
	Kinds Kinds
	// Flags qualify what the module wants.
	Flags Flags
	// PluginVersion is the plugin's own version label, free-form.
	PluginVersion string
	// Minor is the ABI minor the module was built for: 0 when the block
	// ends at the label, as blocks of guests older than the field do.
	Minor uint16
}

// infoFixedLen is the fixed part of an info block.
const infoFixedLen = 2 + 1 + 1 + 2

// AppendInfo appends the info block of i to dst.
func AppendInfo(dst []byte, i Info) []byte {
	v := i.PluginVersion
	if len(v) > 255 {
		v = v[:255]
	}
	dst = le.AppendUint16(dst, i.Version)
	dst = append(dst, byte(i.Kinds), byte(i.Flags))
	dst = le.AppendUint16(dst, uint16(len(v)))
	dst = append(dst, v...)
	return le.AppendUint16(dst, i.Minor)
}

// ReadInfo decodes an info block. Bytes after the fields it knows are
// ignored, so later minor additions stay readable.
func ReadInfo(b []byte) (Info, error) {
	if len(b) < infoFixedLen {
		return Info{}, ErrLayout
	}
	n := int(le.Uint16(b[4:]))
	if infoFixedLen+n > len(b) {
		return Info{}, ErrLayout
	}
	i := Info{
		Version:       le.Uint16(b),
		Kinds:         Kinds(b[2]),
		Flags:         Flags(b[3]),
		PluginVersion: string(b[infoFixedLen : infoFixedLen+n]),
	}
	if rest := b[infoFixedLen+n:]; len(rest) >= 2 {
		i.Minor = le.Uint16(rest)
	}
	return i, nil
}
