package wasm

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
)

// moduleOf assembles a module from sections.
func moduleOf(sections ...[]byte) []byte {
	bin := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	for _, s := range sections {
		bin = append(bin, s...)
	}
	return bin
}

// withLocals is a module with one function of params i32 parameters that
// declares locals more i32 locals, in one entry.
func withLocals(params int, locals uint32) []byte {
	typ := appendU32([]byte{1, 0x60}, uint32(params))
	for range params {
		typ = append(typ, 0x7F)
	}
	typ = append(typ, 0)
	code := append(appendU32([]byte{1}, locals), 0x7F, 0x0B)
	return moduleOf(
		wasmSection(secType, typ...),
		wasmSection(secFunction, 1, 0),
		wasmSection(secCode, append([]byte{1}, wasmBody(code...)...)...),
	)
}

// TestDeclaredCountsAreBounded loads modules of a few bytes that declare
// counts the runtime's decoder would allocate for before reading a single
// entry: gigabytes, or a process killed for want of memory. Each must be
// refused with ErrModule.
func TestDeclaredCountsAreBounded(t *testing.T) {
	huge := appendU32(nil, 0xFFFFFFF0)
	names := append(appendName(nil, "name"), 1)
	names = append(appendU32(names, uint32(len(huge))), huge...)
	for _, tc := range []struct {
		name, want string
		bin        []byte
	}{
		{"locals", "locals", withLocals(0, 0xFFFFFFF0)},
		{"locals and params", "50001 locals", withLocals(2, maxFunctionLocals-1)},
		{"imports", "entries", moduleOf(wasmSection(secImport, huge...))},
		{"functions", "entries", moduleOf(wasmSection(secFunction, huge...))},
		{"function names", "entries", moduleOf(wasmSection(secCustom, names...))},
		{"table", "table", moduleOf(wasmSection(secTable, 1, 0x70, 0x00, 0x80, 0x80, 0x80, 0x40))},
		{"data", "entries", moduleOf(wasmSection(secData, append([]byte{1, 1}, huge...)...))},
		// wazero reads a known name subsection's entries without regard
		// to its declared size, and takes the next subsection from where
		// they end: here function names with no entries, then local
		// names for four billion functions hidden inside the same
		// subsection, and an empty subsection after it, so the section
		// has bytes left when wazero reaches them.
		{"hidden names", "continues past", moduleOf(wasmSection(secCustom,
			append(append(append(appendName(nil, "name"), 1, 8, 0, 2, 6), huge...), 9, 0)...))},
		// An imported table may carry an initializer prefix, as a defined
		// one; its size counts all the same.
		{"imported table", "table", moduleOf(wasmSection(secImport,
			append(appendName(appendName([]byte{1}, "m"), "t"), 0x01, 0x40, 0x00, 0x70, 0x00, 0x80, 0x80, 0x80, 0x40, 0xD0, 0x70, 0x0B)...))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, untrusted := range []bool{false, true} {
				_, err := Load(context.Background(), Options{Name: "p", Kind: KindFilter, Module: tc.bin, Untrusted: untrusted})
				if !errors.Is(err, ErrModule) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("untrusted %v: err = %v, want ErrModule mentioning %q", untrusted, err, tc.want)
				}
			}
		})
	}
}

// TestNotWasmLeftToWazero checks that checkLimits passes what is not a
// WebAssembly 1.0 binary on untouched, so the error says what it is.
func TestNotWasmLeftToWazero(t *testing.T) {
	_, err := Load(context.Background(), Options{Name: "p", Kind: KindFilter, Module: []byte("a text file, not a module\n")})
	if !errors.Is(err, ErrModule) || !strings.Contains(err.Error(), "magic number") {
		t.Fatalf("err = %v, want ErrModule naming the magic number", err)
	}
}

// TestLocalsAtTheLimit compiles a function with exactly maxFunctionLocals
// locals, its parameters included: the bound refuses nothing a browser runs.
func TestLocalsAtTheLimit(t *testing.T) {
	bin := withLocals(2, maxFunctionLocals-2)
	if _, err := checkLimits(bin); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, bin); err != nil {
		t.Fatal(err)
	}
}

// TestTableGrowthIsBounded runs table.grow asking for four billion
// elements, 32 GiB of references in wazero, from a table declared without
// a maximum: the maximum checkLimits gives it makes the grow fail with -1,
// as the specification allows any grow to, while small grows succeed.
func TestTableGrowthIsBounded(t *testing.T) {
	// (table 0 funcref) (func (export "grow") (param i32) (result i32)
	//   (table.grow 0 (ref.null func) (local.get 0)))
	bin := moduleOf(
		wasmSection(secType, 1, 0x60, 1, 0x7F, 1, 0x7F),
		wasmSection(secFunction, 1, 0),
		wasmSection(secTable, 1, 0x70, 0x00, 0x00),
		wasmSection(secExport, append(appendName([]byte{1}, "grow"), 0x00, 0x00)...),
		wasmSection(secCode, append([]byte{1}, wasmBody(0, 0xD0, 0x70, 0x20, 0x00, 0xFC, 0x0F, 0x00, 0x0B)...)...),
	)
	out, err := checkLimits(bin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	mod, err := rt.Instantiate(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	grow := mod.ExportedFunction("grow")
	for _, tc := range []struct{ delta, want uint32 }{{5, 0}, {0xFFFFFFF0, 0xFFFFFFFF}, {maxTableElements, 0xFFFFFFFF}, {5, 5}} {
		res, err := grow.Call(ctx, uint64(tc.delta))
		if err != nil || uint32(res[0]) != tc.want {
			t.Fatalf("grow(%d) = %v, %v; want %d", tc.delta, res, err, int32(tc.want))
		}
	}
}
