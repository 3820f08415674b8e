package sdk

import (
	"fmt"

	"github.com/rmq-go/rmq/sdk/abi"
)

// Level is a log level, on the same scale as log/slog's.
type Level int32

// The log levels.
const (
	LevelDebug Level = -4
	LevelInfo  Level = 0
	LevelWarn  Level = 4
	LevelError Level = 8
)

// Initializer is implemented by a registered Filter, Allocator, TxnPolicy or
// Transform that wants the plugin's config. Init runs once per instance,
// after every init function and before the first call; an error refuses the
// config and the host does not load the module.
type Initializer interface {
	Init(config []byte) error
}

// state is the module's one instance of everything. A wasm instance runs one
// call at a time, so it needs no lock.
var state struct {
	filter    Filter
	allocator Allocator
	txn       TxnPolicy
	transform Transform
	version   string
	config    []byte

	buf      []byte // the buffer broker_buffer hands out
	info     []byte // the info block broker_info points at
	allocOut []byte // indices broker_allocate points at
	tests    []byte // the self-test blob broker_selftest points at
	keys     []byte // the key list broker_filter_keys points at

	msg  Message     // the view every filter record is read into
	half HalfMessage // the view every half message is read into
	tmsg TransformMessage
	tout []byte // the transform result broker_transform points at

	exprs    map[string]*compiledExpr
	lastExpr *compiledExpr

	filterTests    []FilterTest
	allocateTests  []AllocateTest
	txnTests       []TxnTest
	transformTests []TransformTest
	// staticTests counts the tests registered before the first Init; a
	// later Init drops what the one before it added.
	staticTests struct {
		set                           bool
		filter, alloc, txn, transform int
	}
}

// maxCachedExpressions bounds the compiled expressions a module keeps; the
// cache starts over when it is full.
const maxCachedExpressions = 256

// RegisterFilter makes f the module's filter. Call it from an init function.
// If f also implements BodyFilter and NeedsBody reports true (asked after
// Init, so the config may decide), filter batches carry message bodies.
// Registering a second filter panics.
func RegisterFilter(f Filter) {
	if f == nil || state.filter != nil {
		panic("sdk: RegisterFilter called with nil or twice")
	}
	state.filter = f
}

// filterBody reports whether the registered filter wants bodies.
func filterBody() bool {
	b, ok := state.filter.(BodyFilter)
	return ok && b.NeedsBody()
}

// filterInflate reports whether the registered filter wants bodies inflated.
func filterInflate() bool {
	b, ok := state.filter.(BodyInflater)
	return ok && b.NeedsBody() && b.InflateBodies()
}

// filterValues reports whether the registered filter takes resolved values.
func filterValues() bool {
	v, ok := state.filter.(ValueFilter)
	return ok && v.ResolvesValues()
}

// RegisterAllocator makes a the module's allocation strategy. Call it from
// an init function. Registering a second one panics.
func RegisterAllocator(a Allocator) {
	if a == nil || state.allocator != nil {
		panic("sdk: RegisterAllocator called with nil or twice")
	}
	state.allocator = a
}

// RegisterTxnPolicy makes p the module's transaction-check policy. Call it
// from an init function. Registering a second one panics.
func RegisterTxnPolicy(p TxnPolicy) {
	if p == nil || state.txn != nil {
		panic("sdk: RegisterTxnPolicy called with nil or twice")
	}
	state.txn = p
}

// SetVersion sets the version label the broker reports for this plugin.
func SetVersion(v string) { state.version = v }

// Config returns the plugin's config bytes as the broker passed them, or nil
// before the module is initialized. The caller must not modify them.
func Config() []byte { return state.config }

// Log writes msg to the broker's log at level, naming the plugin.
func Log(level Level, msg string) { hostLog(level, msg) }

// Logf formats and logs like Log.
func Logf(level Level, format string, args ...any) { hostLog(level, fmt.Sprintf(format, args...)) }

// kinds returns the kinds the module serves.
func kinds() abi.Kinds {
	var k abi.Kinds
	if state.filter != nil {
		k |= abi.KindFilter
	}
	if state.allocator != nil {
		k |= abi.KindAllocate
	}
	if state.txn != nil {
		k |= abi.KindTxnCheck
	}
	if state.transform != nil {
		k |= abi.KindTransform
	}
	return k
}

// buffer returns the call buffer, grown to at least size bytes.
func buffer(size uint32) []byte {
	if uint64(len(state.buf)) < uint64(size) || len(state.buf) == 0 {
		state.buf = make([]byte, max(size, 64))
	}
	return state.buf
}

// fail leaves msg for the host and returns s.
func fail(s abi.Status, msg string) abi.Status {
	abi.PutError(state.buf, msg)
	return s
}

// runInit is broker_init.
func runInit(config []byte) abi.Status {
	state.config = append([]byte(nil), config...)
	if st := &state.staticTests; !st.set {
		st.set = true
		st.filter, st.alloc, st.txn, st.transform = len(state.filterTests), len(state.allocateTests), len(state.txnTests), len(state.transformTests)
	} else {
		state.filterTests = state.filterTests[:st.filter]
		state.allocateTests = state.allocateTests[:st.alloc]
		state.txnTests = state.txnTests[:st.txn]
		state.transformTests = state.transformTests[:st.transform]
	}
	for _, v := range []any{state.filter, state.allocator, state.txn, state.transform} {
		if in, ok := v.(Initializer); ok {
			if err := in.Init(state.config); err != nil {
				return fail(abi.StatusBadConfig, err.Error())
			}
		}
	}
	return abi.StatusOK
}

// infoBlock is broker_info.
func infoBlock() []byte {
	var flags abi.Flags
	if filterBody() {
		flags |= abi.FlagFilterBody
	}
	if filterInflate() {
		flags |= abi.FlagFilterBodyInflated
	}
	if filterValues() {
		flags |= abi.FlagFilterValues
	}
	state.info = abi.AppendInfo(state.info[:0], abi.Info{
		Version:       abi.Version,
		Minor:         abi.Minor,
		Kinds:         kinds(),
		Flags:         flags,
		PluginVersion: state.version,
	})
	return state.info
}
