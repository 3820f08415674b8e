package wasm

import (
	"errors"
	"slices"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/rmq-go/rmq/sdk/abi"
)

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

// signature is a function type.
type signature struct{ params, results []api.ValueType }

func (s signature) matches(f api.FunctionDefinition) bool {
	return slices.Equal(s.params, f.ParamTypes()) && slices.Equal(s.results, f.ResultTypes())
}

// The ABI's function types.
var (
	sigMarker   = signature{}
	sigBuffer   = signature{[]api.ValueType{i32}, []api.ValueType{i32}}
	sigInit     = signature{[]api.ValueType{i32, i32}, []api.ValueType{i32}}
	sigPacked   = signature{nil, []api.ValueType{i64}}
	sigBatch    = signature{[]api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32}}
	sigAllocate = signature{[]api.ValueType{i32, i32}, []api.ValueType{i64}}
	sigLog      = signature{[]api.ValueType{i32, i32, i32}, nil}
	sigNow      = signature{nil, []api.ValueType{i64}}
	sigCheck    = signature{nil, []api.ValueType{i32}} // interruptCheck
)

// hostImports are the broker_v1 functions and their types.
var hostImports = map[string]signature{
	abi.ImportLog:   sigLog,
	abi.ImportNowMs: sigNow,
}

// wasiAllowed are the WASI functions Go's wasip1 runtime and standard
// library link. The filesystem calls are among them because package os links
// them even when unused; no directory is preopened, so they fail. Sockets
// (sock_*) are refused.
var wasiAllowed = map[string]bool{
	"args_get": true, "args_sizes_get": true, "environ_get": true, "environ_sizes_get": true,
	"clock_res_get": true, "clock_time_get": true, "random_get": true, "proc_exit": true,
	"sched_yield": true, "poll_oneoff": true,
	"fd_close": true, "fd_fdstat_get": true, "fd_fdstat_set_flags": true, "fd_fdstat_set_rights": true,
	"fd_filestat_get": true, "fd_filestat_set_size": true, "fd_filestat_set_times": true,
	"fd_pread": true, "fd_prestat_dir_name": true, "fd_prestat_get": true, "fd_pwrite": true,
	"fd_read": true, "fd_readdir": true, "fd_seek": true, "fd_sync": true, "fd_datasync": true,
	"fd_tell": true, "fd_write": true,
	"path_create_directory": true, "path_filestat_get": true, "path_filestat_set_times": true,
	"path_link": true, "path_open": true, "path_readlink": true, "path_remove_directory": true,
	"path_rename": true, "path_symlink": true, "path_unlink_file": true,
}

// moduleShape is what validation learned about a module.
type moduleShape struct {
	hasInfo       bool
	hasSelfTest   bool
	hasFilterKeys bool
	// start is the export the host calls once an instance is instantiated
	// ("" when the module has none: its start section, if any, has run).
	start string
}

// validateModule checks a compiled module's imports and exports against ABI
// v1 and the plugin's kind, reporting every problem at once. instrumented
// admits the import instrument adds.
func validateModule(c wazero.CompiledModule, kind Kind, instrumented bool) (moduleShape, error) {
	var (
		shape moduleShape
		errs  []error
	)
	bad := func(sentinel error, format string, args ...any) {
		errs = append(errs, wrapf(sentinel, format, args...))
	}
	fns := c.ExportedFunctions()
	if _, ok := fns[abi.ExportMarker]; !ok {
		var other []string
		for name := range fns {
			if strings.HasPrefix(name, abi.MarkerPrefix) {
				other = append(other, "v"+strings.TrimPrefix(name, abi.MarkerPrefix))
			}
		}
		if len(other) > 0 {
			slices.Sort(other)
			bad(ErrABIVersion, "module is built for ABI %s; this broker speaks v%d", strings.Join(other, ", "), abi.Version)
		} else {
			bad(ErrABIVersion, "module exports no %s marker: not a broker plugin, or built for another ABI", abi.ExportMarker)
		}
		// Without the marker nothing else about the module is meaningful.
		return shape, errors.Join(errs...)
	}
	if _, ok := c.ExportedMemories()[abi.ExportMemory]; !ok {
		bad(ErrModule, "module exports no memory named %q", abi.ExportMemory)
	}
	shape.start = startFunction(c, fns, bad)
	_, kindExport, _ := kind.bit()
	kindSig := sigBatch
	if kind == KindAllocate || kind == KindTransform {
		kindSig = sigAllocate
	}
	need := []struct {
		name     string
		sig      signature
		optional bool
		seen     *bool
	}{
		{abi.ExportMarker, sigMarker, false, nil},
		{abi.ExportBuffer, sigBuffer, false, nil},
		{abi.ExportInit, sigInit, false, nil},
		{kindExport, kindSig, false, nil},
		{abi.ExportInfo, sigPacked, true, &shape.hasInfo},
		{abi.ExportSelfTest, sigPacked, true, &shape.hasSelfTest},
		{abi.ExportFilterKeys, sigAllocate, true, &shape.hasFilterKeys},
	}
	for _, n := range need {
		f, ok := fns[n.name]
		switch {
		case !ok && n.optional:
		case !ok && n.name == kindExport:
			bad(ErrKind, "module exports no %s, so it cannot serve kind %s", n.name, kind)
		case !ok:
			bad(ErrModule, "module exports no %s", n.name)
		case !n.sig.matches(f):
			bad(ErrModule, "export %s has type %v → %v, want %v → %v", n.name,
				typeNames(f.ParamTypes()), typeNames(f.ResultTypes()), typeNames(n.sig.params), typeNames(n.sig.results))
		case n.seen != nil:
			*n.seen = true
		}
	}
	for _, f := range c.ImportedFunctions() {
		mod, name, _ := f.Import()
		switch mod {
		case wasi_snapshot_preview1.ModuleName:
			if strings.HasPrefix(name, "sock_") {
				bad(ErrModule, "module imports %s.%s: plugins have no sockets", mod, name)
			} else if !wasiAllowed[name] {
				bad(ErrModule, "module imports %s.%s, which plugins do not get", mod, name)
			}
		case abi.ImportModule:
			if sig, ok := hostImports[name]; !ok {
				bad(ErrModule, "module imports %s.%s, which ABI v%d does not define", mod, name, abi.Version)
			} else if !sig.matches(f) {
				bad(ErrModule, "import %s.%s has type %v → %v, want %v → %v", mod, name,
					typeNames(f.ParamTypes()), typeNames(f.ResultTypes()), typeNames(sig.params), typeNames(sig.results))
			}
		case interruptModule:
			// instrument refuses a module that imports from it already.
			if !instrumented || name != interruptCheck || !sigCheck.matches(f) {
				bad(ErrModule, "module imports %s.%s: only %s and WASI functions are available", mod, name, abi.ImportModule)
			}
		default:
			bad(ErrModule, "module imports %s.%s: only %s and WASI functions are available", mod, name, abi.ImportModule)
		}
	}
	for _, m := range c.ImportedMemories() {
		mod, name, _ := m.Import()
		bad(ErrModule, "module imports memory %s.%s; it must define its own", mod, name)
	}
	return shape, errors.Join(errs...)
}

// startFunction picks the export that initializes an instance. A module
// that imports WASI is a WASI program and must be a reactor: it exports
// _initialize (a command's _start would run main and exit). A module that
// imports no WASI, as AssemblyScript's output, may export _initialize,
// _start (AssemblyScript's --exportStart), or neither, when its toolchain
// initializes it from the wasm start section at instantiation.
func startFunction(c wazero.CompiledModule, fns map[string]api.FunctionDefinition, bad func(error, string, ...any)) string {
	if f, ok := fns[abi.ExportInitialize]; ok {
		if !sigMarker.matches(f) {
			bad(ErrModule, "export %s must take and return nothing", abi.ExportInitialize)
		}
		return abi.ExportInitialize
	}
	wasi := false
	for _, f := range c.ImportedFunctions() {
		if mod, _, _ := f.Import(); mod == wasi_snapshot_preview1.ModuleName {
			wasi = true
		}
	}
	_, cmd := fns[abi.ExportStart]
	switch {
	case wasi && cmd:
		bad(ErrModule, "module is a WASI command (exports _start, not _initialize); build Go plugins with -buildmode=c-shared")
	case wasi:
		bad(ErrModule, "module imports WASI but exports no _initialize; only modules without WASI imports may start with _start or their start section")
	case cmd:
		if !sigMarker.matches(fns[abi.ExportStart]) {
			bad(ErrModule, "export %s must take and return nothing", abi.ExportStart)
		}
		return abi.ExportStart
	}
	return ""
}

func typeNames(ts []api.ValueType) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = api.ValueTypeName(t)
	}
	return out
}
