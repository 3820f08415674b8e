package wasm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// wasmSection encodes a section of the binary format.
func wasmSection(id byte, body ...byte) []byte {
	return append(appendU32([]byte{id}, uint32(len(body))), body...)
}

// wasmBody encodes a function body: its size, then code.
func wasmBody(code ...byte) []byte { return append(appendU32(nil, uint32(len(code))), code...) }

// loopModule is a module that exercises what instrument renumbers:
//
//	import host.add1 (i32) → i32          function 0
//	spin ()                                function 1: loop br 0 end
//	sum (n i32) → i32                      function 2: n calls of add1 in a loop
//	viacall (n i32) → i32                  function 3: call sum
//	viatable (n i32) → i32                 function 4: call_indirect sum through table slot 0
//	elements: table 0 slot 0 = sum; names for spin and sum
//
// spin, when given, replaces spin's code.
func loopModule(extraImport bool, spin ...byte) []byte {
	bin := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	bin = append(bin, wasmSection(secType, 2, 0x60, 0, 0, 0x60, 1, 0x7F, 1, 0x7F)...)
	imports := []byte{1}
	if extraImport {
		imports[0] = 2
		imports = appendName(appendName(imports, interruptModule), interruptCheck)
		imports = append(imports, 0x00, 0x01)
	}
	imports = appendName(appendName(imports, "host"), "add1")
	imports = append(imports, 0x00, 0x01)
	bin = append(bin, wasmSection(secImport, imports...)...)
	bin = append(bin, wasmSection(secFunction, 4, 0, 1, 1, 1)...)
	bin = append(bin, wasmSection(secTable, 1, 0x70, 0x00, 1)...)
	exports := []byte{4}
	for i, name := range []string{"spin", "sum", "viacall", "viatable"} {
		exports = append(appendName(exports, name), 0x00, byte(i+1))
	}
	bin = append(bin, wasmSection(secExport, exports...)...)
	bin = append(bin, wasmSection(secElement, 1, 0x00, 0x41, 0x00, 0x0B, 1, 2)...)
	code := []byte{4}
	if spin == nil {
		spin = []byte{0x03, 0x40, 0x0C, 0x00, 0x0B, 0x0B}
	}
	code = append(code, wasmBody(append([]byte{0}, spin...)...)...)
	code = append(code, wasmBody(1, 1, 0x7F,
		0x03, 0x40,
		0x20, 0x01, 0x10, 0x00, 0x21, 0x01, // acc = add1(acc)
		0x20, 0x00, 0x41, 0x01, 0x6B, 0x22, 0x00, // n--
		0x0D, 0x00, // br_if n != 0
		0x0B,
		0x20, 0x01, 0x0B)...)
	code = append(code, wasmBody(0, 0x20, 0x00, 0x10, 0x02, 0x0B)...)
	code = append(code, wasmBody(0, 0x20, 0x00, 0x41, 0x00, 0x11, 0x01, 0x00, 0x0B)...)
	bin = append(bin, wasmSection(secCode, code...)...)
	names := appendName(nil, "name")
	fnNames := appendName([]byte{2, 1}, "spin")
	fnNames = appendName(append(fnNames, 2), "sum")
	names = append(append(names, 1), appendU32(nil, uint32(len(fnNames)))...)
	names = append(names, fnNames...)
	return append(bin, wasmSection(secCustom, names...)...)
}

// loopRuntime is a runtime with host.add1 and, when instrumented, the
// interruption check.
func loopRuntime(t *testing.T, instrumented bool) wazero.Runtime {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCloseOnContextDone(!instrumented))
	t.Cleanup(func() { _ = rt.Close(ctx) })
	add1 := func(_ context.Context, _ api.Module, stack []uint64) { stack[0]++ }
	if _, err := rt.NewHostModuleBuilder("host").NewFunctionBuilder().
		WithGoModuleFunction(api.GoModuleFunc(add1), []api.ValueType{i32}, []api.ValueType{i32}).Export("add1").
		Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	if instrumented {
		if _, err := rt.NewHostModuleBuilder(interruptModule).NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(checkDeadline), sigCheck.params, sigCheck.results).Export(interruptCheck).
			Instantiate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return rt
}

// TestInstrument runs the instrumented module: its functions compute what
// they did (calls, table slots, exports and names renumbered; loops of
// several budgets), and an endless loop is stopped at its deadline.
func TestInstrument(t *testing.T) {
	bin := loopModule(false)
	out, err := instrument(bin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	rt := loopRuntime(t, true)
	mod, err := rt.Instantiate(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3*interruptBudget + 7
	for _, name := range []string{"sum", "viacall", "viatable"} {
		res, err := mod.ExportedFunction(name).Call(ctx, n)
		if err != nil || len(res) != 1 || res[0] != n {
			t.Fatalf("%s(%d) = %v, %v", name, n, res, err)
		}
	}
	if got := mod.ExportedFunction("sum").Definition().Name(); got != "sum" {
		t.Fatalf("sum is named %q after instrumenting", got)
	}

	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = mod.ExportedFunction("spin").Call(dctx)
	var exit *sys.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != sys.ExitCodeDeadlineExceeded {
		t.Fatalf("spin: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a 50ms deadline stopped the loop after %v", d)
	}

	// The check is in the code: the same module uninstrumented, run with
	// neither wazero's checks nor ours, would spin forever; compiled with
	// wazero's, it also stops.
	rt2 := loopRuntime(t, false)
	mod2, err := rt2.Instantiate(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mod2.ExportedFunction("spin").Call(dctx); err == nil {
		t.Fatal("spin returned")
	}
}

// TestInstrumentRefuses checks the modules instrument leaves to wazero's
// checks: one already importing the check, one with an instruction it
// does not know, and bytes that are not a module.
func TestInstrumentRefuses(t *testing.T) {
	withImport := loopModule(true)
	unknown := loopModule(false)
	// Make spin's br a tail call (return_call 0), which the runtime does
	// not enable and instrument does not know.
	for i := len(unknown) - 1; i > 0; i-- {
		if unknown[i-1] == 0x40 && unknown[i] == 0x0C {
			unknown[i] = 0x12
			break
		}
	}
	// A module whose loop sets global 0, which it does not have: the
	// budget's index once instrumented.
	refill := loopModule(false, 0x03, 0x40, 0x41, 0x00, 0x24, 0x00, 0x0C, 0x00, 0x0B, 0x0B)
	for name, bin := range map[string][]byte{"imports the check": withImport, "tail call": unknown, "names the budget": refill,
		"not wasm": []byte("\x00asm\x02\x00\x00\x00"), "truncated": loopModule(false)[:40]} {
		if _, err := instrument(bin); !errors.Is(err, errInstrument) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzInstrument checks that checkLimits and instrument fail cleanly on
// any input, that no module checkLimits passes exhausts wazero's memory,
// and that what instrument makes of a module wazero accepts is accepted
// too.
func FuzzInstrument(f *testing.F) {
	f.Add(loopModule(false))
	f.Add(loopModule(true))
	f.Add(withLocals(1, 0xFFFFFFF0))
	f.Add(moduleOf(wasmSection(secCustom, append(appendName(nil, "name"), 1, 3, 0, 2, 0)...)))
	f.Fuzz(func(t *testing.T, bin []byte) {
		// What checkLimits refuses would make wazero allocate without
		// bound below; the broker refuses it the same way.
		bin, err := checkLimits(bin)
		if err != nil {
			if !errors.Is(err, ErrModule) {
				t.Fatalf("error %v is not ErrModule", err)
			}
			return
		}
		out, err := instrument(bin)
		if err != nil {
			if !errors.Is(err, errInstrument) {
				t.Fatalf("error %v is not errInstrument", err)
			}
			return
		}
		// The broker runs the module uninstrumented when the rewrite
		// breaks a limit, as when the rewrite fails.
		if _, err := checkLimits(out); err != nil {
			out = bin
		}
		ctx := context.Background()
		rt := wazero.NewRuntime(ctx)
		defer rt.Close(ctx)
		if _, err := rt.CompileModule(ctx, bin); err != nil {
			return
		}
		if _, err := rt.CompileModule(ctx, out); err != nil {
			t.Fatalf("the module compiles, its instrumented form does not: %v", err)
		}
	})
}

// TestInstrumentBulk checks that bulk instructions count against the
// budget: a loop whose every iteration fills 16 MiB stops soon after its
// deadline, where counting iterations alone would read the clock only
// after 4096 fills, seconds later.
func TestInstrumentBulk(t *testing.T) {
	// (memory 256) (func (export "fill") (loop (memory.fill (i32.const 0) (i32.const 0) (i32.const 16Mi)) (br 0)))
	bin := []byte{0, 'a', 's', 'm', 1, 0, 0, 0}
	bin = append(bin, wasmSection(secType, 1, 0x60, 0, 0)...)
	bin = append(bin, wasmSection(secFunction, 1, 0)...)
	bin = append(bin, wasmSection(secMemory, 1, 0x00, 0x80, 0x02)...)
	bin = append(bin, wasmSection(secExport, append(appendName([]byte{1}, "fill"), 0x00, 0x00)...)...)
	bin = append(bin, wasmSection(secCode, append([]byte{1}, wasmBody(0, 0x03, 0x40,
		0x41, 0x00, 0x41, 0x00, 0x41, 0x80, 0x80, 0x80, 0x08, 0xFC, 0x0B, 0x00,
		0x0C, 0x00, 0x0B, 0x0B)...)...)...)
	out, err := instrument(bin)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	mod, err := loopRuntime(t, true).Instantiate(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = mod.ExportedFunction("fill").Call(dctx)
	var exit *sys.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != sys.ExitCodeDeadlineExceeded {
		t.Fatalf("fill: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("a 50ms deadline stopped the fills after %v", d)
	}
}
