package sql92

import (
	"bytes"
	"fmt"
	"unsafe"

	"github.com/rmq-go/rmq/core/message"
	"github.com/rmq-go/rmq/internal/properties"
)

// Expr is a compiled SQL92 filter expression. It is immutable and safe for
// concurrent use; compile it once per subscription (see Cache) and evaluate
// it per message.
type Expr struct {
	root  *node
	names []string // property names by slot
	canon string
}

// Compile parses expr. It returns a *SyntaxError naming the position and
// the expected token for an expression it cannot accept, or an error
// wrapping ErrTooLong for one longer than MaxExprLen.
func Compile(expr string) (*Expr, error) {
	if len(expr) > MaxExprLen {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLong, len(expr), MaxExprLen)
	}
	toks, err := lex(expr)
	if err != nil {
		return nil, err
	}
	p := &parser{src: expr, toks: toks, slots: make(map[string]int)}
	root, err := p.run()
	if err != nil {
		return nil, err
	}
	return &Expr{root: root, names: p.names, canon: format(root)}, nil
}

// String returns the canonical form of e: keywords in upper case, single
// spaces, parentheses only where precedence needs them (and around the
// operand of NOT, for clarity), comments dropped. Compiling it gives an
// expression that evaluates the same and prints the same.
func (e *Expr) String() string { return e.canon }

// Properties returns the distinct property names e refers to, in order of
// first use. The caller must not modify the slice.
func (e *Expr) Properties() []string { return e.names }

// Eval reports whether a message with properties p matches: whether e
// evaluates to TRUE (FALSE and NULL both mean no match). It does not
// allocate.
func (e *Expr) Eval(p message.Properties) bool {
	st := evalState{props: p}
	if len(e.names) > 1 {
		st.prefetch(e.names)
	}
	return e.root.evalBool(&st) == triTrue
}

// EvalValues is Eval for a caller that has already looked the properties
// up: vals[i] is the value of Properties()[i] when bit i of present is set,
// as message.Properties.Lookup would give it, and the property is absent
// otherwise (as it is for a slot beyond len(vals) or 63). A plugin whose
// broker resolves the properties it names calls it with what the broker
// sent, which spares it scanning the properties. It does not allocate.
func (e *Expr) EvalValues(vals [][]byte, present uint64) bool {
	st := evalState{given: true, present: present, givenVals: vals}
	n := min(len(e.names), len(vals), memoSlots)
	st.seen = uint8(1<<len(e.names[:min(len(e.names), memoSlots)]) - 1)
	st.found = uint8(present) & uint8(1<<n-1)
	copy(st.vals[:n], vals)
	return e.root.evalBool(&st) == triTrue
}

// MatchTagHash reports true: an SQL92 expression needs the properties.
func (e *Expr) MatchTagHash(int64) bool { return true }

// NeedsRecord reports true: Match must see each record.
func (e *Expr) NeedsRecord() bool { return true }

// Pure reports that an expression's answer depends on the record alone and
// never fails, so a broker may evaluate it once, ahead of pulls.
func (e *Expr) Pure() bool { return true }

// Match sets out[i] to Eval of batch[i]'s properties. It never returns an
// error; the records must be valid (message.Record.Validate).
func (e *Expr) Match(batch []message.Record, out []bool) error {
	for i, r := range batch {
		out[i] = e.Eval(r.Properties())
	}
	return nil
}

type opcode uint8

const (
	opConst   opcode = iota // val
	opProp                  // the property name, slot
	opNeg                   // -kids[0], not a numeric literal: always NULL
	opAnd                   // kids[0] AND kids[1] AND ...
	opOr                    // kids[0] OR kids[1] OR ...
	opNot                   // NOT kids[0]
	opCmp                   // kids[0] cmp kids[1]
	opBetween               // kids[0] [NOT] BETWEEN kids[1] AND kids[2]
	opIn                    // kids[0] [NOT] IN set (kids[0] is an opProp)
	opStr                   // kids[0] [NOT] str val (val is a string)
	opIsNull                // kids[0] IS [NOT] NULL
)

type cmpOp uint8

const (
	cmpEq cmpOp = iota
	cmpNe
	cmpLt
	cmpLe
	cmpGt
	cmpGe
)

type strOp uint8

const (
	strContains strOp = iota
	strStartsWith
	strEndsWith
)

// smallSet is the IN-list size up to which lists are scanned linearly.
const smallSet = 8

// node is one operator or operand of a compiled expression.
type node struct {
	op       opcode
	cmp      cmpOp
	str      strOp
	not      bool  // NOT BETWEEN, NOT IN, NOT CONTAINS..., IS NOT NULL
	fast     bool  // opCmp: a property and a literal; opBetween: a property and numbers
	fastCmp  cmpOp // opCmp when fast: the operator with the property on the left
	prop     *node // opCmp when fast: the property operand
	lit      *node // opCmp when fast: the literal operand
	height   int32 // 1 + the largest height of kids
	pos, end int   // source range, for compile errors
	val      value // opConst; opStr's literal
	num      num   // opConst: val as a number, when it is one
	name     string
	slot     int
	kids     []*node
	set      []string            // opIn
	setMap   map[string]struct{} // opIn, when len(set) > smallSet
}

// kind is the type of a runtime value.
type kind uint8

const (
	kNull kind = iota
	kBool
	kLong
	kDouble
	kString
)

// value is a runtime value. Strings alias the properties being evaluated
// or the compiled literal, so passing values around never allocates.
type value struct {
	kind kind
	b    bool
	i    int64
	f    float64
	s    []byte
}

func stringValue(s string) value { return value{kind: kString, s: []byte(s)} }

// tri is a three-valued logic result.
type tri uint8

const (
	triFalse tri = iota
	triTrue
	triUnknown
)

func triOf(b bool) tri {
	if b {
		return triTrue
	}
	return triFalse
}

// memoSlots is how many distinct properties one evaluation remembers after
// looking them up; further ones are looked up on each use.
const memoSlots = 8

// evalState holds one evaluation's property lookups. It lives on the
// evaluating goroutine's stack.
type evalState struct {
	props       message.Properties
	seen, found uint8 // bit i: slot i looked up, and present
	vals        [memoSlots][]byte
	// given: the values came from EvalValues, givenVals and present, which
	// lookupFar reads for slots past memoSlots instead of props.
	given     bool
	present   uint64
	givenVals [][]byte
}

// prefetch resolves the first memoSlots names in one pass over the
// properties, which costs about as much as one Lookup. Later pairs win, as
// in Lookup.
func (st *evalState) prefetch(names []string) {
	names = names[:min(len(names), memoSlots)]
	st.seen = uint8(1<<len(names) - 1)
	if scanBytewise {
		st.prefetchBytewise(names)
	} else {
		st.prefetchPairs(names)
	}
}

// prefetchPairs splits the properties with Each, which finds each
// separator with bytes.IndexByte: the faster way natively, where
// IndexByte is vectorised.
func (st *evalState) prefetchPairs(names []string) {
	st.props.Each(func(k, v []byte) bool {
		st.remember(names, k, v)
		return true
	})
}

// prefetchBytewise splits the properties in one loop over their bytes,
// calling nothing per pair: the faster way in WebAssembly, where a call
// costs more than scanning the few bytes of a typical key or value. It
// reads the format as Each does: a piece up to a 0x02 (or the end) is a
// pair if it holds exactly one 0x01; other pieces are skipped.
func (st *evalState) prefetchBytewise(names []string) {
	p := []byte(st.props)
	for len(p) > 0 {
		sep, end, ok := -1, len(p), true
		for j, c := range p {
			if c == properties.ValueSep {
				end = j
				break
			}
			if c == properties.NameSep {
				ok = sep < 0
				sep = j
			}
		}
		if sep >= 0 && ok {
			st.remember(names, p[:sep], p[sep+1:end])
		}
		if end == len(p) {
			return
		}
		p = p[end+1:]
	}
}

// remember records v as the value of k if k is one of names.
func (st *evalState) remember(names []string, k, v []byte) {
	for i, name := range names {
		if same(k, name) {
			st.vals[i] = v
			st.found |= 1 << i
			return
		}
	}
}

func (st *evalState) lookup(n *node) ([]byte, bool) {
	if n.slot >= memoSlots {
		return st.lookupFar(n)
	}
	bit := uint8(1) << n.slot
	if st.seen&bit == 0 {
		v, ok := st.props.Lookup(n.name)
		st.seen |= bit
		if ok {
			st.found |= bit
			st.vals[n.slot] = v
		}
	}
	return st.vals[n.slot], st.found&bit != 0
}

// lookupFar is lookup for a slot past the memo: looked up on each use, or
// read from the values EvalValues was given.
func (st *evalState) lookupFar(n *node) ([]byte, bool) {
	if !st.given {
		return st.props.Lookup(n.name)
	}
	if n.slot >= len(st.givenVals) || n.slot >= 64 || st.present&(1<<n.slot) == 0 {
		return nil, false
	}
	return st.givenVals[n.slot], true
}

// evalBool evaluates a node in a boolean position.
func (n *node) evalBool(st *evalState) tri {
	switch n.op {
	case opAnd:
		res := triTrue
		for _, k := range n.kids {
			switch k.evalBool(st) {
			case triFalse:
				return triFalse
			case triUnknown:
				res = triUnknown
			}
		}
		return res
	case opOr:
		res := triFalse
		for _, k := range n.kids {
			switch k.evalBool(st) {
			case triTrue:
				return triTrue
			case triUnknown:
				res = triUnknown
			}
		}
		return res
	case opNot:
		switch n.kids[0].evalBool(st) {
		case triTrue:
			return triFalse
		case triFalse:
			return triTrue
		}
		return triUnknown
	case opCmp:
		if n.fast {
			return n.comparePropConst(st)
		}
		return compare(n.cmp, n.kids[0].evalValue(st), n.kids[1].evalValue(st))
	case opBetween:
		if n.fast {
			return n.betweenPropConst(st)
		}
		x, lo, hi := n.kids[0].evalValue(st), n.kids[1].evalValue(st), n.kids[2].evalValue(st)
		if n.not {
			return or3(compare(cmpLt, x, lo), compare(cmpGt, x, hi))
		}
		return and3(compare(cmpGe, x, lo), compare(cmpLe, x, hi))
	case opIn:
		v, ok := st.lookup(n.kids[0])
		if !ok {
			return triUnknown
		}
		return triOf(n.inSet(v) != n.not)
	case opStr:
		x := n.kids[0].evalValue(st)
		if x.kind != kString || len(n.val.s) == 0 {
			return triFalse
		}
		var r bool
		switch n.str {
		case strContains:
			r = bytes.Contains(x.s, n.val.s)
		case strStartsWith:
			r = bytes.HasPrefix(x.s, n.val.s)
		default:
			r = bytes.HasSuffix(x.s, n.val.s)
		}
		return triOf(r != n.not)
	case opIsNull:
		return triOf((n.kids[0].evalValue(st).kind == kNull) != n.not)
	case opProp:
		// A property used as a condition: never a boolean, as in RocketMQ.
		if _, ok := st.lookup(n); ok {
			return triFalse
		}
		return triUnknown
	case opConst:
		if n.val.kind == kBool {
			return triOf(n.val.b)
		}
		return triUnknown
	}
	return triUnknown
}

// evalValue evaluates a node in an operand position.
func (n *node) evalValue(st *evalState) value {
	switch n.op {
	case opConst:
		return n.val
	case opProp:
		v, ok := st.lookup(n)
		if !ok {
			return value{}
		}
		return value{kind: kString, s: v}
	case opNeg:
		return value{}
	}
	switch n.evalBool(st) {
	case triTrue:
		return value{kind: kBool, b: true}
	case triFalse:
		return value{kind: kBool}
	}
	return value{}
}

func (n *node) inSet(v []byte) bool {
	if n.setMap != nil {
		_, ok := n.setMap[string(v)]
		return ok
	}
	for _, s := range n.set {
		if s == string(v) {
			return true
		}
	}
	return false
}

// comparePropConst is compare for a property and a literal, the common
// case, without building values.
func (n *node) comparePropConst(st *evalState) tri {
	v, ok := st.lookup(n.prop)
	if !ok {
		return triUnknown
	}
	c := &n.lit.val
	eq := n.cmp == cmpEq
	switch c.kind {
	case kString: // only = and <> are allowed with strings
		return triOf(same(v, c.s) == eq)
	case kBool: // likewise
		return triOf(bytes.EqualFold(v, []byte("true")) == c.b == eq)
	}
	if c.kind == kLong {
		// The common case, an integer property against an integer
		// literal, without parseNumber's general reading.
		if x, ok := parseSmallInt(v); ok {
			return triOf(holds(n.fastCmp, cmp3(x, c.i)))
		}
	}
	x, ok := parseNumber(v)
	if !ok {
		if eq || n.cmp == cmpNe {
			return triOf(!eq)
		}
		return triUnknown
	}
	return triOf(holds(n.fastCmp, numCompare(x, n.lit.num)))
}

// betweenPropConst is BETWEEN for a property and two numeric literals.
func (n *node) betweenPropConst(st *evalState) tri {
	v, ok := st.lookup(n.kids[0])
	if !ok {
		return triUnknown
	}
	x, ok := parseNumber(v)
	if !ok {
		return triUnknown
	}
	in := numCompare(x, n.kids[1].num) >= 0 && numCompare(x, n.kids[2].num) <= 0
	return triOf(in != n.not)
}

func holds(op cmpOp, c int) bool {
	switch op {
	case cmpEq:
		return c == 0
	case cmpNe:
		return c != 0
	case cmpLt:
		return c < 0
	case cmpLe:
		return c <= 0
	case cmpGt:
		return c > 0
	}
	return c >= 0
}

func and3(a, b tri) tri {
	if a == triFalse || b == triFalse {
		return triFalse
	}
	if a == triUnknown || b == triUnknown {
		return triUnknown
	}
	return triTrue
}

func or3(a, b tri) tri {
	if a == triTrue || b == triTrue {
		return triTrue
	}
	if a == triUnknown || b == triUnknown {
		return triUnknown
	}
	return triFalse
}

// compare applies a comparison operator under the type rules of doc.go.
func compare(op cmpOp, x, y value) tri {
	if x.kind == kNull || y.kind == kNull {
		return triUnknown
	}
	if op == cmpEq || op == cmpNe {
		return triOf(equal(x, y) == (op == cmpEq))
	}
	c, ok := order(x, y)
	if !ok {
		return triUnknown
	}
	return triOf(holds(op, c))
}

// equal reports whether two non-NULL values are equal: strings by bytes;
// a boolean with a boolean or with text ("true" in any case is TRUE, any
// other text FALSE); numbers numerically, text converted to a number when
// it reads as one (otherwise not equal).
func equal(x, y value) bool {
	if x.kind == kString && y.kind == kString {
		return bytes.Equal(x.s, y.s)
	}
	if x.kind == kBool || y.kind == kBool {
		xb, ok1 := asBool(x)
		yb, ok2 := asBool(y)
		return ok1 && ok2 && xb == yb
	}
	xn, ok1 := asNumber(x)
	yn, ok2 := asNumber(y)
	return ok1 && ok2 && numCompare(xn, yn) == 0
}

// order compares two non-NULL values as numbers; ok is false when either
// is a boolean or text that does not read as a number.
func order(x, y value) (c int, ok bool) {
	xn, ok1 := asNumber(x)
	yn, ok2 := asNumber(y)
	if !ok1 || !ok2 {
		return 0, false
	}
	return numCompare(xn, yn), true
}

func asBool(v value) (b, ok bool) {
	switch v.kind {
	case kBool:
		return v.b, true
	case kString:
		return bytes.EqualFold(v.s, []byte("true")), true
	}
	return false, false
}

func asNumber(v value) (num, bool) {
	switch v.kind {
	case kLong:
		return num{i: v.i}, true
	case kDouble:
		return num{isDouble: true, f: v.f}, true
	case kString:
		return parseNumber(v.s)
	}
	return num{}, false
}

// MemSize estimates the bytes e holds: its nodes, their literals, IN sets
// and the canonical text. A cache uses it to bound its memory rather than
// its entry count, since one long expression can cost as much as thousands
// of short ones.
func (e *Expr) MemSize() int {
	n := int(unsafe.Sizeof(Expr{})) + len(e.canon)
	for _, s := range e.names {
		n += int(unsafe.Sizeof(s)) + len(s)
	}
	return n + e.root.memSize()
}

func (n *node) memSize() int {
	if n == nil {
		return 0
	}
	size := int(unsafe.Sizeof(*n)) + len(n.val.s) + len(n.name) + cap(n.kids)*int(unsafe.Sizeof(n))
	for _, s := range n.set {
		size += int(unsafe.Sizeof(s)) + len(s)
	}
	if n.setMap != nil {
		// A map entry costs its key header and some bucket overhead.
		size += len(n.setMap) * (int(unsafe.Sizeof("")) + 16)
	}
	for _, k := range n.kids {
		size += k.memSize()
	}
	return size
}

// same reports whether a and b hold the same bytes: in WebAssembly
// (scanBytewise) with sameBytewise, natively with the runtime's
// comparison.
func same[T string | []byte](a []byte, b T) bool {
	if scanBytewise {
		return sameBytewise(a, b)
	}
	return string(a) == string(b)
}

// sameBytewise compares a and b in a loop, which for the few bytes of a
// key or value is cheaper in WebAssembly than a call to the runtime's
// comparison.
func sameBytewise[T string | []byte](a []byte, b T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
