package wasm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// An untrusted module's code is rewritten before it is compiled so that it
// counts down a budget at every loop header and, when the budget runs out,
// calls the host function interruptModule.interruptCheck. That function
// stops the call if its deadline has passed and otherwise returns a new
// budget. wazero's own interruption (RuntimeConfig.WithCloseOnContextDone)
// leaves the compiled code at every loop header instead, to Go and back,
// which costs a Go guest several times its trusted speed; the countdown is
// a decrement and a branch, and the call to the host every interruptBudget
// loop iterations keeps both guarantees wazero's checks give: a runaway loop
// is stopped shortly after its deadline, and the Go scheduler (and garbage
// collector) get the goroutine back between checks.
//
// Loops need the check: code without loops runs each instruction at most
// once per call of its function, and recursion without a loop ends in a
// stack overflow (the tail calls that could recurse without growing the
// stack are refused: the runtime does not enable them). wazero checks at
// the same places. Bulk memory and table instructions count too, for more:
// a loop of them could otherwise run thousands of whole-memory copies
// between two readings of the clock.
const (
	interruptModule = "rmq_interrupt" // the host module, for instrumented modules only
	interruptCheck  = "check"         // () → i32, the next budget
	// interruptBudget is the loop iterations between calls to the host. A
	// call costs about as much as a hundred iterations of a short loop, so
	// it is amortized to noise, while a Go guest's tightest loop runs the
	// budget out within tens of microseconds.
	interruptBudget = 4096
	// bulkCost is what a bulk memory or table instruction (memory.copy,
	// memory.fill …) counts against the budget: one can move the whole
	// memory, so the clock is read at least every interruptBudget/bulkCost
	// of them, while a guest's small copies still reach the host rarely.
	bulkCost = 64
)

// errInstrument marks a module the rewriter does not understand; such a
// module is run with wazero's own checks instead.
var errInstrument = errors.New("cannot instrument module")

// Section ids of the binary format, in the order they appear.
const (
	secCustom    = 0
	secType      = 1
	secImport    = 2
	secFunction  = 3
	secTable     = 4
	secMemory    = 5
	secGlobal    = 6
	secExport    = 7
	secStart     = 8
	secElement   = 9
	secCode      = 10
	secData      = 11
	secDataCount = 12
	secTag       = 13
)

// wasmHeader opens a WebAssembly 1.0 binary: the magic and the version.
var wasmHeader = []byte{0, 'a', 's', 'm', 1, 0, 0, 0}

// sectionRank orders the known sections as the format requires them.
var sectionRank = map[byte]int{
	secType: 1, secImport: 2, secFunction: 3, secTable: 4, secMemory: 5, secTag: 6,
	secGlobal: 7, secExport: 8, secStart: 9, secElement: 10, secDataCount: 11, secCode: 12, secData: 13,
}

// section is one section of a module, its contents raw.
type section struct {
	id   byte
	body []byte
}

// instrument returns bin with the interruption countdown added: a type
// () → i32, an import of interruptModule.interruptCheck as the first
// function after the other imports (every function defined by the module
// moves up by one index), a mutable i32 global holding the budget, and the
// check at the head of every loop. The rewritten module means the same as
// bin otherwise. It fails with errInstrument for a module it cannot
// rewrite: one that uses instructions it does not know or already imports
// from interruptModule.
func instrument(bin []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(instrumentError); ok {
				out, err = nil, fmt.Errorf("%w: %s", errInstrument, string(e))
				return
			}
			panic(r)
		}
	}()
	if len(bin) < 8 || !bytes.Equal(bin[:8], wasmHeader) {
		fail("not a WebAssembly 1.0 binary")
	}
	var secs []section
	for r := (&reader{b: bin, off: 8}); !r.done(); {
		id := r.byte()
		n := r.u32()
		secs = append(secs, section{id, r.bytes(int(n))})
	}
	find := func(id byte) *section {
		for i := range secs {
			if secs[i].id == id {
				return &secs[i]
			}
		}
		// Insert an empty section where the order puts it.
		at := len(secs)
		for i, s := range secs {
			if rk, ok := sectionRank[s.id]; ok && rk > sectionRank[id] {
				at = i
				break
			}
		}
		secs = append(secs[:at], append([]section{{id, []byte{0}}}, secs[at:]...)...)
		return &secs[at]
	}

	rw := &rewriter{}
	// The type of the check: appended, so no type index moves.
	types := find(secType)
	{
		r := &reader{b: types.body}
		n := r.u32()
		rw.checkType = n
		types.body = append(append(appendU32(nil, n+1), r.rest()...), 0x60, 0, 1, 0x7F)
	}
	// The import: after the module's own, so imported functions keep their
	// indices and defined ones move up by one.
	imports := find(secImport)
	{
		r := &reader{b: imports.body}
		n := r.u32()
		for range n {
			mod := r.name()
			r.name()
			if mod == interruptModule {
				fail("module imports from " + interruptModule)
			}
			switch kind := r.byte(); kind {
			case 0x00: // func
				r.u32()
				rw.importedFuncs++
			case 0x01: // table
				r.byte()
				r.limits()
			case 0x02: // memory
				r.limits()
			case 0x03: // global
				r.byte()
				r.byte()
				rw.importedGlobals++
			case 0x04: // tag
				r.byte()
				r.u32()
			default:
				fail(fmt.Sprintf("import kind %#x", kind))
			}
		}
		body := appendU32(nil, n+1)
		body = append(body, imports.body[len(appendU32(nil, n)):]...)
		body = appendName(body, interruptModule)
		body = appendName(body, interruptCheck)
		body = append(body, 0x00)
		imports.body = appendU32(body, rw.checkType)
	}
	// The budget's global: appended after the module's own.
	globals := find(secGlobal)
	{
		r := &reader{b: globals.body}
		n := r.u32()
		// The module's own code must not name the budget's index: an
		// invalid module before the rewrite, it would be valid after, and
		// could refill its own budget.
		rw.globals = rw.importedGlobals + n
		body := appendU32(nil, n+1)
		for range n {
			body = append(body, r.byte(), r.byte()) // value type, mutability
			body = rw.expr(body, r)
		}
		rw.budget = rw.importedGlobals + n
		body = append(body, 0x7F, 0x01, 0x41)
		body = appendS32(body, interruptBudget)
		globals.body = append(body, 0x0B)
	}
	rw.checkFunc = rw.importedFuncs
	for i := range secs {
		s := &secs[i]
		switch s.id {
		case secExport:
			s.body = rw.exports(s.body)
		case secStart:
			r := &reader{b: s.body}
			s.body = appendU32(nil, rw.fn(r.u32()))
		case secElement:
			s.body = rw.elements(s.body)
		case secCode:
			s.body = rw.code(s.body)
		case secCustom:
			s.body = rw.custom(s.body)
		}
	}
	out = append(make([]byte, 0, len(bin)+len(bin)/8), bin[:8]...)
	for _, s := range secs {
		if s.body == nil {
			continue // dropped
		}
		out = append(out, s.id)
		out = appendU32(out, uint32(len(s.body)))
		out = append(out, s.body...)
	}
	return out, nil
}

// instrumentError is what fail panics with; instrument recovers it.
type instrumentError string

func fail(why string) { panic(instrumentError(why)) }

// reader decodes the binary format; it panics through fail on malformed
// input.
type reader struct {
	b   []byte
	off int
}

func (r *reader) done() bool   { return r.off >= len(r.b) }
func (r *reader) rest() []byte { return r.b[r.off:] }

func (r *reader) byte() byte {
	if r.off >= len(r.b) {
		fail("unexpected end")
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) bytes(n int) []byte {
	if n < 0 || n > len(r.b)-r.off {
		fail("unexpected end")
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	return b
}

// uleb reads an unsigned LEB128 of at most bits bits.
func (r *reader) uleb(bits uint) uint64 {
	var v uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= bits+7 {
			fail("integer too long")
		}
		c := r.byte()
		v |= uint64(c&0x7F) << shift
		if c&0x80 == 0 {
			return v
		}
	}
}

// sleb skips a signed LEB128 of at most bits bits.
func (r *reader) sleb(bits uint) {
	for shift := uint(0); ; shift += 7 {
		if shift >= bits+7 {
			fail("integer too long")
		}
		if r.byte()&0x80 == 0 {
			return
		}
	}
}

func (r *reader) u32() uint32 {
	v := r.uleb(32)
	if v > math.MaxUint32 {
		fail("integer too large")
	}
	return uint32(v)
}

func (r *reader) name() string { return string(r.bytes(int(r.u32()))) }

// blockType skips a block type: empty, a value type or a type index.
func (r *reader) blockType() {
	if r.off < len(r.b) && (r.b[r.off] == 0x40 || isValType(r.b[r.off])) {
		r.off++
		return
	}
	r.sleb(33)
}

func isValType(c byte) bool {
	return c == 0x7F || c == 0x7E || c == 0x7D || c == 0x7C || c == 0x7B || c == 0x70 || c == 0x6F
}

func appendU32(dst []byte, v uint32) []byte { return binary.AppendUvarint(dst, uint64(v)) }

// appendS32 appends v as a signed LEB128.
func appendS32(dst []byte, v int32) []byte {
	for {
		c := byte(v & 0x7F)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(dst, c)
		}
		dst = append(dst, c|0x80)
	}
}

func appendName(dst []byte, s string) []byte { return append(appendU32(dst, uint32(len(s))), s...) }

// rewriter renumbers functions and inserts the checks.
type rewriter struct {
	importedFuncs   uint32
	importedGlobals uint32
	checkType       uint32 // the type index of () → i32
	checkFunc       uint32 // the check's function index
	budget          uint32 // the budget's global index
	globals         uint32 // the module's own globals, imported ones included
}

// global checks a global index of the original module.
func (rw *rewriter) global(i uint32) {
	if i >= rw.globals {
		fail(fmt.Sprintf("global index %d out of range", i))
	}
}

// fn maps a function index of the original module to the rewritten one.
func (rw *rewriter) fn(i uint32) uint32 {
	if i >= rw.importedFuncs {
		return i + 1
	}
	return i
}

// check appends the countdown of cost units placed at a loop head (1)
// and before a bulk memory or table instruction (bulkCost):
//
//	global.get budget; i32.const cost; i32.sub; global.set budget
//	global.get budget; i32.const 0; i32.le_s
//	if; call check; global.set budget; end
//
// The budget can pass below zero by a bulk instruction's cost, so the test
// is ≤ 0, not = 0.
func (rw *rewriter) check(dst []byte, cost int32) []byte {
	dst = appendU32(append(dst, 0x23), rw.budget)
	dst = appendS32(append(dst, 0x41), cost)
	dst = append(dst, 0x6B)
	dst = appendU32(append(dst, 0x24), rw.budget)
	dst = appendU32(append(dst, 0x23), rw.budget)
	dst = append(dst, 0x41, 0x00, 0x4C, 0x04, 0x40)
	dst = appendU32(append(dst, 0x10), rw.checkFunc)
	dst = appendU32(append(dst, 0x24), rw.budget)
	return append(dst, 0x0B)
}

func (rw *rewriter) exports(body []byte) []byte {
	r := &reader{b: body}
	n := r.u32()
	out := appendU32(nil, n)
	for range n {
		out = appendName(out, r.name())
		kind := r.byte()
		idx := r.u32()
		switch kind {
		case 0x00:
			idx = rw.fn(idx)
		case 0x03:
			rw.global(idx)
		}
		out = appendU32(append(out, kind), idx)
	}
	return out
}

func (rw *rewriter) elements(body []byte) []byte {
	r := &reader{b: body}
	n := r.u32()
	out := appendU32(nil, n)
	for range n {
		flags := r.u32()
		out = appendU32(out, flags)
		if flags > 7 {
			fail(fmt.Sprintf("element segment flags %d", flags))
		}
		if flags&0x02 != 0 && flags&0x01 == 0 { // explicit table index
			out = appendU32(out, r.u32())
		}
		if flags&0x01 == 0 { // active: the offset
			out = rw.expr(out, r)
		}
		if flags&0x03 != 0 { // element kind or reference type
			out = append(out, r.byte())
		}
		count := r.u32()
		out = appendU32(out, count)
		for range count {
			if flags&0x04 != 0 {
				out = rw.expr(out, r)
			} else {
				out = appendU32(out, rw.fn(r.u32()))
			}
		}
	}
	return out
}

// expr copies a constant expression, renumbering ref.func.
func (rw *rewriter) expr(dst []byte, r *reader) []byte {
	dst, _ = rw.instrs(dst, r, true)
	return dst
}

func (rw *rewriter) code(body []byte) []byte {
	r := &reader{b: body}
	n := r.u32()
	out := appendU32(nil, n)
	var fbody []byte
	for range n {
		size := r.u32()
		fr := &reader{b: r.bytes(int(size))}
		fbody = fbody[:0]
		locals := fr.u32()
		fbody = appendU32(fbody, locals)
		for range locals {
			fbody = appendU32(fbody, fr.u32())
			t := fr.byte()
			if !isValType(t) {
				fail(fmt.Sprintf("local of type %#x", t))
			}
			fbody = append(fbody, t)
		}
		fbody, _ = rw.instrs(fbody, fr, false)
		if !fr.done() {
			fail("function body continues past its end")
		}
		out = appendU32(out, uint32(len(fbody)))
		out = append(out, fbody...)
	}
	return out
}

// instrs copies instructions from r to dst, renumbering function indices
// and, unless constant, putting the check after every loop's block type.
// A constant expression ends at its end; a function body at the end of r.
func (rw *rewriter) instrs(dst []byte, r *reader, constant bool) ([]byte, bool) {
	flushed := r.off // r.b[flushed:r.off] is yet to be copied
	flush := func() {
		dst = append(dst, r.b[flushed:r.off]...)
		flushed = r.off
	}
	for !r.done() {
		at := r.off
		op := r.byte()
		switch {
		case op == 0x0B: // end
			if constant {
				flush()
				return dst, true
			}
		case op == 0x00, op == 0x01, op == 0x05, op == 0x0A, op == 0x0F, op == 0x19, op == 0x1A, op == 0x1B,
			op == 0xD1, op == 0xD4, op >= 0x45 && op <= 0xC4:
		case op == 0x03: // loop
			r.blockType()
			flush()
			dst = rw.check(dst, 1)
		case op == 0x02, op == 0x04, op == 0x06: // block, if, try
			r.blockType()
		case op == 0x1F: // try_table
			r.blockType()
			for range r.u32() {
				switch kind := r.byte(); kind {
				case 0x00, 0x01:
					r.u32()
					r.u32()
				case 0x02, 0x03:
					r.u32()
				default:
					fail(fmt.Sprintf("catch kind %#x", kind))
				}
			}
		case op == 0x23, op == 0x24: // global.get, global.set
			rw.global(r.u32())
		case op == 0x07, op == 0x08, op == 0x09, op == 0x18, op == 0x0C, op == 0x0D, op == 0xD5, op == 0xD6,
			op >= 0x20 && op <= 0x26, op == 0x3F, op == 0x40, op == 0x14:
			r.u32()
		case op == 0x0E: // br_table
			for range r.u32() {
				r.u32()
			}
			r.u32()
		case op == 0x10, op == 0xD2: // call, ref.func
			flush()
			dst = appendU32(dst, rw.fn(r.u32()))
			flushed = r.off
		case op == 0x11: // call_indirect
			r.u32()
			r.u32()
		case op == 0x1C: // select with types
			for range r.u32() {
				r.byte()
			}
		case op >= 0x28 && op <= 0x3E:
			r.memarg()
		case op == 0x41:
			r.sleb(32)
		case op == 0x42:
			r.sleb(64)
		case op == 0x43:
			r.bytes(4)
		case op == 0x44:
			r.bytes(8)
		case op == 0xD0: // ref.null
			r.sleb(33)
		case op == 0xFC:
			sub := r.u32()
			switch sub {
			case 8, 10, 11, 12, 14, 17: // memory.init, .copy, .fill; table.init, .copy, .fill
				if !constant {
					dst = append(dst, r.b[flushed:at]...)
					flushed = at
					dst = rw.check(dst, bulkCost)
				}
			}
			switch {
			case sub <= 7:
			case sub == 8, sub == 10, sub == 12, sub == 14:
				r.u32()
				r.u32()
			case sub == 9, sub == 11, sub == 13, sub >= 15 && sub <= 17:
				r.u32()
			default:
				fail(fmt.Sprintf("instruction 0xFC %d", sub))
			}
		case op == 0xFD:
			switch sub := r.u32(); {
			case sub <= 11, sub == 92, sub == 93:
				r.memarg()
			case sub == 12, sub == 13:
				r.bytes(16)
			case sub >= 21 && sub <= 34:
				r.byte()
			case sub >= 84 && sub <= 91:
				r.memarg()
				r.byte()
			case sub <= 0x113:
			default:
				fail(fmt.Sprintf("instruction 0xFD %d", sub))
			}
		case op == 0xFE:
			switch sub := r.u32(); {
			case sub == 0x03:
				r.byte()
			case sub <= 0x02, sub >= 0x10 && sub <= 0x4E:
				r.memarg()
			default:
				fail(fmt.Sprintf("instruction 0xFE %d", sub))
			}
		default:
			// Tail calls (0x12, 0x13, 0x15) among others: unknown here.
			fail(fmt.Sprintf("instruction %#x", op))
		}
	}
	if constant {
		fail("constant expression without end")
	}
	flush()
	return dst, false
}

// memarg skips a memory argument: alignment (with a memory index when bit
// 6 is set) and offset.
func (r *reader) memarg() {
	if r.u32()&0x40 != 0 {
		r.u32()
	}
	r.uleb(64)
}

// custom renumbers the function names of a "name" section and drops its
// other per-function subsections; other custom sections are kept as they
// are.
func (rw *rewriter) custom(body []byte) []byte {
	r := &reader{b: body}
	if r.name() != "name" {
		return body
	}
	out := appendName(nil, "name")
	for !r.done() {
		id := r.byte()
		sub := &reader{b: r.bytes(int(r.u32()))}
		var b []byte
		switch id {
		case 0: // the module's name
			b = sub.b
		case 1: // function names
			n := sub.u32()
			b = appendU32(nil, n)
			for range n {
				b = appendU32(b, rw.fn(sub.u32()))
				b = appendName(b, sub.name())
			}
		default:
			continue
		}
		out = appendU32(append(out, id), uint32(len(b)))
		out = append(out, b...)
	}
	return out
}
