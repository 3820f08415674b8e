package sql92

import (
	"fmt"
	"math"
	"strconv"
)

// parser is a recursive-descent parser over the token slice. Errors unwind
// through a panic carrying a bailout, recovered in Compile.
type parser struct {
	src   string
	toks  []token
	i     int
	depth int            // current recursion depth (parentheses, NOT, signs)
	slots map[string]int // property name → slot
	names []string       // slot → property name
}

type bailout struct{ err error }

func (p *parser) fail(pos int, expected, found string) {
	panic(bailout{&SyntaxError{Pos: pos, Expected: expected, Found: found}})
}

func (p *parser) peek() token { return p.toks[p.i] }

// peek2 returns the token after the next one (tEOF at the end).
func (p *parser) peek2() token {
	if p.i+1 < len(p.toks) {
		return p.toks[p.i+1]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) expect(k tokKind, expected string) token {
	t := p.next()
	if t.kind != k {
		p.fail(t.pos, expected, p.describe(t))
	}
	return t
}

func (p *parser) describe(t token) string {
	if t.kind == tEOF {
		return endOfInput
	}
	return quoteSource(p.src[t.pos:t.end])
}

func (p *parser) source(n *node) string { return quoteSource(p.src[n.pos:n.end]) }

func (p *parser) enter(pos int) {
	p.depth++
	if p.depth > MaxDepth {
		p.fail(pos, fmt.Sprintf("at most %d levels of nesting", MaxDepth), "deeper nesting")
	}
}

func (p *parser) leave() { p.depth-- }

// finish sets n's height from its operands and enforces MaxDepth on it, so
// that evaluating and printing recurse no deeper than MaxDepth.
func (p *parser) finish(n *node) *node {
	h := 0
	for _, k := range n.kids {
		h = max(h, int(k.height))
	}
	n.height = int32(h + 1)
	if h+1 > MaxDepth {
		p.fail(n.pos, fmt.Sprintf("at most %d levels of nesting", MaxDepth), "deeper nesting")
	}
	switch n.op {
	case opConst:
		switch n.val.kind {
		case kLong:
			n.num = num{i: n.val.i}
		case kDouble:
			n.num = num{isDouble: true, f: n.val.f}
		}
	case opCmp:
		l, r := n.kids[0], n.kids[1]
		switch {
		case l.op == opProp && r.op == opConst:
			n.fast, n.prop, n.lit, n.fastCmp = true, l, r, n.cmp
		case l.op == opConst && r.op == opProp:
			n.fast, n.prop, n.lit, n.fastCmp = true, r, l, mirror[n.cmp]
		}
	case opBetween:
		n.fast = n.kids[0].op == opProp && isNumber(n.kids[1]) && isNumber(n.kids[2])
	}
	return n
}

// mirror[op] is the operator that holds for (y, x) when op holds for (x, y).
var mirror = [...]cmpOp{cmpEq: cmpEq, cmpNe: cmpNe, cmpLt: cmpGt, cmpLe: cmpGe, cmpGt: cmpLt, cmpGe: cmpLe}

func isNumber(n *node) bool {
	return n.op == opConst && (n.val.kind == kLong || n.val.kind == kDouble)
}

// run parses the whole expression, turning a bailout into its error.
func (p *parser) run() (n *node, err error) {
	defer func() {
		if r := recover(); r != nil {
			b, ok := r.(bailout)
			if !ok {
				panic(r)
			}
			n, err = nil, b.err
		}
	}()
	return p.parse(), nil
}

// parse parses the whole expression:
//
//	selector = or EOF .
func (p *parser) parse() *node {
	n := p.parseOr()
	if t := p.peek(); t.kind != tEOF {
		p.fail(t.pos, "an operator or end of input", p.describe(t))
	}
	p.requireBool(n)
	return n
}

// parseOr: or = and { OR and } .
func (p *parser) parseOr() *node { return p.parseLogic(opOr, tOr, p.parseAnd) }

// parseAnd: and = not { AND not } .
func (p *parser) parseAnd() *node { return p.parseLogic(opAnd, tAnd, p.parseNot) }

func (p *parser) parseLogic(op opcode, tk tokKind, operand func() *node) *node {
	first := operand()
	if p.peek().kind != tk {
		return first
	}
	n := &node{op: op, pos: first.pos}
	add := func(k *node) {
		p.requireBool(k)
		if k.op == op { // (a AND b) AND c is a AND b AND c
			n.kids = append(n.kids, k.kids...)
		} else {
			n.kids = append(n.kids, k)
		}
		n.end = k.end
	}
	add(first)
	for p.peek().kind == tk {
		p.next()
		add(operand())
	}
	return p.finish(n)
}

// parseNot: not = NOT not | equality .
func (p *parser) parseNot() *node {
	if p.peek().kind != tNot {
		return p.parseEquality()
	}
	t := p.next()
	p.enter(t.pos)
	x := p.parseNot()
	p.leave()
	p.requireBool(x)
	return p.finish(&node{op: opNot, pos: t.pos, end: x.end, kids: []*node{x}})
}

// parseEquality: equality = comparison { ("=" | "<>") comparison | IS [NOT] NULL } .
func (p *parser) parseEquality() *node {
	l := p.parseComparison()
	for {
		switch t := p.peek(); t.kind {
		case tEq, tNe:
			p.next()
			r := p.parseComparison()
			p.checkEqualOperands(l, r)
			op := cmpEq
			if t.kind == tNe {
				op = cmpNe
			}
			l = p.finish(&node{op: opCmp, cmp: op, pos: l.pos, end: r.end, kids: []*node{l, r}})
		case tIs:
			p.next()
			not := false
			want := `"NULL" or "NOT NULL"`
			if p.peek().kind == tNot {
				p.next()
				not, want = true, `"NULL"`
			}
			end := p.expect(tNull, want).end
			l = p.finish(&node{op: opIsNull, not: not, pos: l.pos, end: end, kids: []*node{l}})
		default:
			return l
		}
	}
}

// parseComparison:
//
//	comparison = unary { ( ">" | ">=" | "<" | "<=" ) unary
//	                   | [ NOT ] ( CONTAINS | STARTSWITH | ENDSWITH ) string
//	                   | [ NOT ] BETWEEN unary AND unary
//	                   | [ NOT ] IN "(" string { "," string } ")" } .
func (p *parser) parseComparison() *node {
	l := p.parseUnary()
	for {
		t := p.peek()
		not := false
		if t.kind == tNot {
			switch p.peek2().kind {
			case tContains, tStartsWith, tEndsWith, tBetween, tIn:
				p.next()
				t, not = p.peek(), true
			default:
				t2 := p.peek2()
				p.fail(t2.pos, `"BETWEEN", "IN", "CONTAINS", "STARTSWITH" or "ENDSWITH" after NOT`, p.describe(t2))
			}
		}
		switch t.kind {
		case tGt, tGe, tLt, tLe:
			p.next()
			r := p.parseUnary()
			p.checkOrderOperand(l)
			p.checkOrderOperand(r)
			l = p.finish(&node{op: opCmp, cmp: orderOps[t.kind], pos: l.pos, end: r.end, kids: []*node{l, r}})
		case tContains, tStartsWith, tEndsWith:
			p.next()
			s := p.expect(tString, "a string literal")
			l = p.finish(&node{op: opStr, str: strOps[t.kind], not: not, pos: l.pos, end: s.end,
				kids: []*node{l}, val: stringValue(s.text)})
		case tBetween:
			l = p.parseBetween(l, not)
		case tIn:
			l = p.parseIn(l, not)
		default:
			return l
		}
	}
}

var orderOps = map[tokKind]cmpOp{tGt: cmpGt, tGe: cmpGe, tLt: cmpLt, tLe: cmpLe}

var strOps = map[tokKind]strOp{tContains: strContains, tStartsWith: strStartsWith, tEndsWith: strEndsWith}

func (p *parser) parseBetween(x *node, not bool) *node {
	p.next()
	lo := p.parseUnary()
	p.expect(tAnd, `"AND"`)
	hi := p.parseUnary()
	p.checkOrderOperand(x)
	p.checkOrderOperand(lo)
	p.checkOrderOperand(hi)
	if lo.op == opConst && hi.op == opConst {
		if c, _ := order(lo.val, hi.val); c > 0 {
			p.fail(lo.pos, "a lower bound not above the upper bound "+p.src[hi.pos:hi.end], p.source(lo))
		}
	}
	return p.finish(&node{op: opBetween, not: not, pos: x.pos, end: hi.end, kids: []*node{x, lo, hi}})
}

func (p *parser) parseIn(x *node, not bool) *node {
	if x.op != opProp {
		p.fail(x.pos, "a property name before IN", p.source(x))
	}
	p.next()
	p.expect(tLParen, `"("`)
	n := &node{op: opIn, not: not, pos: x.pos, kids: []*node{x}}
	for {
		s := p.expect(tString, "a string literal")
		n.set = append(n.set, s.text)
		t := p.next()
		if t.kind == tRParen {
			n.end = t.end
			break
		}
		if t.kind != tComma {
			p.fail(t.pos, `"," or ")"`, p.describe(t))
		}
	}
	if len(n.set) > smallSet {
		n.setMap = make(map[string]struct{}, len(n.set))
		for _, s := range n.set {
			n.setMap[s] = struct{}{}
		}
	}
	return p.finish(n)
}

// parseUnary: unary = ( "+" | "-" ) unary | primary .
//
// A sign before a numeric literal is folded into the literal. A minus
// before anything else is kept; such an operand always evaluates to NULL.
func (p *parser) parseUnary() *node {
	t := p.peek()
	if t.kind != tPlus && t.kind != tMinus {
		return p.parsePrimary()
	}
	p.next()
	if t.kind == tMinus && p.peek().kind == tInt {
		// Parsed with its sign, so that the smallest int64 is reachable.
		lit := p.next()
		v, err := strconv.ParseInt("-"+lit.text, 10, 64)
		if err != nil {
			p.fail(t.pos, intRange, p.describe(lit))
		}
		return p.finish(&node{op: opConst, pos: t.pos, end: lit.end, val: value{kind: kLong, i: v}})
	}
	p.enter(t.pos)
	x := p.parseUnary()
	p.leave()
	if t.kind == tPlus {
		return x
	}
	if x.op == opConst {
		switch x.val.kind {
		case kLong:
			if x.val.i == math.MinInt64 {
				p.fail(t.pos, intRange, "the negation of "+p.source(x))
			}
			return p.finish(&node{op: opConst, pos: t.pos, end: x.end, val: value{kind: kLong, i: -x.val.i}})
		case kDouble:
			return p.finish(&node{op: opConst, pos: t.pos, end: x.end, val: value{kind: kDouble, f: -x.val.f}})
		}
	}
	return p.finish(&node{op: opNeg, pos: t.pos, end: x.end, kids: []*node{x}})
}

const intRange = "an integer between -9223372036854775808 and 9223372036854775807"

// parsePrimary: primary = literal | identifier | "(" or ")" .
func (p *parser) parsePrimary() *node {
	t := p.next()
	n := &node{op: opConst, pos: t.pos, end: t.end}
	switch t.kind {
	case tString:
		n.val = stringValue(t.text)
	case tInt:
		v, err := strconv.ParseInt(t.text, 10, 64)
		if err != nil {
			p.fail(t.pos, intRange, p.describe(t))
		}
		n.val = value{kind: kLong, i: v}
	case tFloat:
		v, err := strconv.ParseFloat(t.text, 64)
		if err != nil || v == 0 && !zeroDigits(t.text) {
			p.fail(t.pos, "a number within the range of a double", p.describe(t))
		}
		n.val = value{kind: kDouble, f: v}
	case tTrue, tFalse:
		n.val = value{kind: kBool, b: t.kind == tTrue}
	case tNull:
		n.val = value{kind: kNull}
	case tIdent:
		n.op, n.name = opProp, t.text
		slot, ok := p.slots[t.text]
		if !ok {
			slot = len(p.names)
			p.slots[t.text] = slot
			p.names = append(p.names, t.text)
		}
		n.slot = slot
	case tLParen:
		p.enter(t.pos)
		x := p.parseOr()
		p.expect(tRParen, `")"`)
		p.leave()
		return x
	default:
		p.fail(t.pos, "a value", p.describe(t))
	}
	return p.finish(n)
}

// zeroDigits reports whether a float literal has no nonzero digit in its
// mantissa, so that a zero result is exact rather than an underflow.
func zeroDigits(lit string) bool {
	for i := 0; i < len(lit); i++ {
		switch c := lit[i]; {
		case c == 'e' || c == 'E':
			return true
		case '1' <= c && c <= '9':
			return false
		}
	}
	return true
}

// Static checks. They restate RocketMQ's compile-time rules: which operands
// make sense for which operators.

type static uint8

const (
	sNull static = iota
	sBoolConst
	sNumber
	sString
	sProp
	sNeg
	sBoolExpr
)

func staticOf(n *node) static {
	switch n.op {
	case opConst:
		switch n.val.kind {
		case kNull:
			return sNull
		case kBool:
			return sBoolConst
		case kString:
			return sString
		default:
			return sNumber
		}
	case opProp:
		return sProp
	case opNeg:
		return sNeg
	default:
		return sBoolExpr
	}
}

// requireBool rejects operands of AND, OR, NOT and the whole expression
// that cannot yield a boolean: numbers, strings and negations. A property
// is accepted (it is TRUE never, FALSE when present, NULL when absent).
func (p *parser) requireBool(n *node) {
	switch staticOf(n) {
	case sNumber, sString, sNeg:
		p.fail(n.pos, "a boolean expression", p.source(n))
	}
}

// checkOrderOperand rejects literals other than numbers and boolean
// expressions as operands of <, <=, >, >= and BETWEEN.
func (p *parser) checkOrderOperand(n *node) {
	switch staticOf(n) {
	case sNull, sBoolConst, sString, sBoolExpr:
		p.fail(n.pos, "a number or a property name", p.source(n))
	}
}

// checkEqualOperands rejects NULL as an operand of = and <>, and literals
// of which exactly one is a boolean.
func (p *parser) checkEqualOperands(l, r *node) {
	ls, rs := staticOf(l), staticOf(r)
	if ls == sNull {
		p.fail(l.pos, "a value other than NULL (test with IS NULL)", p.source(l))
	}
	if rs == sNull {
		p.fail(r.pos, "a value other than NULL (test with IS NULL)", p.source(r))
	}
	if l.op == opConst && r.op == opConst && (ls == sBoolConst) != (rs == sBoolConst) {
		p.fail(r.pos, "a literal of the same type as "+p.src[l.pos:l.end], p.source(r))
	}
}
