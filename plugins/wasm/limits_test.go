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

// TestLocalsAtTheLimit compiles a function with exactly maxFunctionLocals
// locals, its parameters included: the bound refuses nothing a browser runs.
func TestLocalsAtTheLimit(t *testing.T) {
	bin := withLocals(2, maxFunctionLocals-2)
	if err := checkLimits(bin); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	if _, err := rt.CompileModule(ctx, bin); err != nil {
		t.Fatal(err)
	}
}
