package wasm

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// A module's binary declares counts ahead of what they count: how many
// imports follow, how many locals a function has, how large a table is.
// wazero's decoder allocates for a declared count before it reads the
// first entry, and its compiler for every declared local, so a module of a
// few bytes can ask for gigabytes; when the allocation fails the Go
// runtime ends the process, which no recover catches. checkLimits reads
// those counts before wazero sees the module and refuses the ones no valid
// module declares:
//
//   - a vector cannot hold more entries than bytes remain in its section,
//     since every entry takes at least one;
//   - a function has at most maxFunctionLocals locals, its parameters
//     included;
//   - the tables of a module start with at most maxTableElements elements
//     between them.
//
// A table can also grow while the module runs, and wazero bounds a table
// without a declared maximum only at four billion elements (32 GiB), so
// checkLimits gives every table the module defines a maximum of its share
// of maxTableElements (or its minimum, if larger). The specification lets
// any table.grow fail, returning -1, so the module means what it meant.
//
// Both limits are those of the WebAssembly JavaScript API, so a module that
// runs in a browser passes. checkLimits does not validate otherwise: what
// it does not need to read it skips, and what is malformed beyond the
// counts is left for wazero to report. What it does read, it reads with
// the grammar wazero's decoder uses, so that both find the same counts in
// the same places: wazero decodes a section's entries first and compares
// their length with the section's only afterwards, and in the name
// section it takes each subsection from where the last one's entries
// ended, not from its declared size.
const (
	maxFunctionLocals = 50000
	maxTableElements  = 10000000
)

// checkLimits reports, as ErrModule, the first declared count of bin that
// breaks a limit above. Otherwise it returns bin, or a copy whose tables
// have been given their maximum.
func checkLimits(bin []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(instrumentError)
			if !ok {
				panic(r)
			}
			out, err = nil, wrapf(ErrModule, "%s", string(e))
		}
	}()
	if len(bin) < 8 || !bytes.Equal(bin[:8], wasmHeader) {
		return bin, nil // not a WebAssembly 1.0 binary: wazero says so
	}
	var (
		params     []uint32 // the parameter count of each type
		funcTypes  []uint32 // the type of each function the module defines
		tableElems uint64
	)
	addTable := func(lo uint64) {
		tableElems += lo
		if tableElems > maxTableElements {
			fail(fmt.Sprintf("tables start with %d elements, more than the %d allowed", tableElems, maxTableElements))
		}
	}
	type replacement struct {
		from, to int // the section's bytes in bin, its header included
		body     []byte
	}
	var replace []replacement
	for top := (&reader{b: bin, off: 8}); !top.done(); {
		from := top.off
		id := top.byte()
		r := &reader{b: top.bytes(int(top.u32()))}
		switch id {
		case secType:
			for range r.vec() {
				if form := r.byte(); form != 0x60 {
					fail(fmt.Sprintf("type form %#x", form))
				}
				n := r.vec()
				for range n {
					r.valType()
				}
				params = append(params, n)
				for range r.vec() {
					r.valType()
				}
			}
		case secImport:
			for range r.vec() {
				r.name()
				r.name()
				switch kind := r.byte(); kind {
				case 0x00: // func
					r.u32()
				case 0x01: // table
					addTable(r.tableType().lo)
				case 0x02: // memory
					r.limits()
				case 0x03: // global
					r.valType()
					r.byte()
				case 0x04: // tag
					r.byte()
					r.u32()
				default:
					fail(fmt.Sprintf("import kind %#x", kind))
				}
			}
		case secFunction:
			for range r.vec() {
				funcTypes = append(funcTypes, r.u32())
			}
		case secTable:
			n := r.vec()
			share := uint64(maxTableElements / max(n, 1))
			body, capped := appendU32(nil, n), false
			for range n {
				t := r.tableType()
				addTable(t.lo)
				if limit := max(t.lo, share); t.flags&0x01 == 0 || t.hi > limit {
					t.flags, t.hi, capped = t.flags|0x01, limit, true
				}
				body = t.append(body)
			}
			if capped {
				replace = append(replace, replacement{from, top.off, body})
			}
		case secMemory:
			for range r.vec() {
				r.limits()
			}
		case secGlobal:
			for range r.vec() {
				r.valType()
				r.byte()
				r.constExpr()
			}
		case secExport:
			for range r.vec() {
				r.name()
				r.byte()
				r.u32()
			}
		case secElement:
			for range r.vec() {
				flags := r.u32()
				if flags > 7 {
					fail(fmt.Sprintf("element segment flags %d", flags))
				}
				if flags&0x02 != 0 && flags&0x01 == 0 {
					r.u32() // the table
				}
				if flags&0x01 == 0 {
					r.constExpr() // the offset
				}
				if flags&0x03 != 0 {
					r.valType() // the element kind or reference type
				}
				for range r.vec() {
					if flags&0x04 != 0 {
						r.constExpr()
					} else {
						r.u32()
					}
				}
			}
		case secCode:
			for i := range r.vec() {
				fr := &reader{b: r.bytes(int(r.u32()))}
				var sum uint64
				if int(i) < len(funcTypes) && int(funcTypes[i]) < len(params) {
					sum = uint64(params[funcTypes[i]])
				}
				for range fr.vec() {
					sum += uint64(fr.u32())
					fr.valType()
				}
				if sum > maxFunctionLocals {
					fail(fmt.Sprintf("function %d has %d locals, more than the %d allowed", i, sum, maxFunctionLocals))
				}
			}
		case secData:
			for range r.vec() {
				switch flags := r.u32(); flags {
				case 0:
					r.constExpr()
				case 1:
				case 2:
					r.u32()
					r.constExpr()
				default:
					fail(fmt.Sprintf("data segment flags %d", flags))
				}
				r.bytes(int(r.vec()))
			}
		case secTag:
			for range r.vec() {
				r.byte()
				r.u32()
			}
		case secCustom:
			if r.name() != "name" {
				break
			}
			// wazero reads a known subsection's entries without regard to
			// its size and the next subsection from where they end, so
			// they must fill it exactly for both readers to agree.
			for !r.done() {
				id := r.byte()
				sub := &reader{b: r.bytes(int(r.u32()))}
				switch id {
				case 0: // the module's name
					sub.name()
				case 1: // function names
					sub.nameMap()
				case 2: // local names
					for range sub.vec() {
						sub.u32()
						sub.nameMap()
					}
				default:
					continue
				}
				if !sub.done() {
					fail(fmt.Sprintf("name subsection %d continues past its entries", id))
				}
			}
		}
	}
	if len(replace) == 0 {
		return bin, nil
	}
	out = make([]byte, 0, len(bin)+16)
	at := 0
	for _, rp := range replace {
		out = append(out, bin[at:rp.from]...)
		out = append(appendU32(append(out, secTable), uint32(len(rp.body))), rp.body...)
		at = rp.to
	}
	return append(out, bin[at:]...), nil
}

// vec reads a vector's length and fails if fewer bytes remain than it
// counts entries.
func (r *reader) vec() uint32 {
	n := r.u32()
	if uint64(n) > uint64(len(r.b)-r.off) {
		fail(fmt.Sprintf("a vector of %d entries in %d bytes", n, len(r.b)-r.off))
	}
	return n
}

// nameMap skips a vector of index and name pairs.
func (r *reader) nameMap() {
	for range r.vec() {
		r.u32()
		r.name()
	}
}

// valType skips a value type: one byte, or a reference type's prefix and
// heap type.
func (r *reader) valType() {
	if c := r.byte(); c == 0x63 || c == 0x64 {
		r.sleb(33)
	}
}

// tableType is a table's type as the binary encodes it.
type tableType struct {
	ref       []byte // the reference type's encoding
	flags     byte   // of the limits
	lo, hi    uint64 // hi if flags has bit 0
	initBytes []byte // the initializer's constant expression, if any
}

// tableType reads a table's type as wazero does, in the table section and
// in imports alike: an optional initializer prefix (0x40 0x00), the
// reference type, the limits, and then the initializer.
func (r *reader) tableType() (t tableType) {
	init := r.off < len(r.b) && r.b[r.off] == 0x40
	if init {
		r.off++
		if r.byte() != 0x00 {
			fail("table prefix 0x40 without 0x00")
		}
	}
	start := r.off
	r.valType()
	t.ref = r.b[start:r.off]
	t.flags, t.lo, t.hi = r.limits()
	if init {
		start = r.off
		r.constExpr()
		t.initBytes = r.b[start:r.off]
	}
	return t
}

// append encodes t onto dst, 32-bit limits included.
func (t tableType) append(dst []byte) []byte {
	if len(t.initBytes) > 0 {
		dst = append(dst, 0x40, 0x00)
	}
	dst = append(append(dst, t.ref...), t.flags)
	dst = binary.AppendUvarint(dst, t.lo)
	if t.flags&0x01 != 0 {
		dst = binary.AppendUvarint(dst, t.hi)
	}
	return append(dst, t.initBytes...)
}

// limits reads a table's or memory's limits: its flags, minimum and, if
// flags has bit 0, maximum.
func (r *reader) limits() (flags byte, lo, hi uint64) {
	flags = r.byte()
	bits := uint(32)
	if flags&0x04 != 0 {
		bits = 64
	}
	lo = r.uleb(bits)
	if flags&0x01 != 0 {
		hi = r.uleb(bits)
	}
	return flags, lo, hi
}

// constExpr skips a constant expression: the instructions wazero accepts
// in one, up to its end.
func (r *reader) constExpr() {
	for {
		switch op := r.byte(); op {
		case 0x0B: // end
			return
		case 0x41: // i32.const
			r.sleb(32)
		case 0x42: // i64.const
			r.sleb(64)
		case 0x43: // f32.const
			r.bytes(4)
		case 0x44: // f64.const
			r.bytes(8)
		case 0x23, 0xD2: // global.get, ref.func
			r.u32()
		case 0xD0: // ref.null
			r.sleb(33)
		case 0x6A, 0x6B, 0x6C, 0x7C, 0x7D, 0x7E: // extended constants
		case 0xFD: // v128.const
			if r.byte() != 0x0C {
				fail("vector instruction in a constant expression")
			}
			r.bytes(16)
		default:
			fail(fmt.Sprintf("opcode %#x in a constant expression", op))
		}
	}
}
