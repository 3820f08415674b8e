package sql92

import (
	"strconv"
	"strings"
)

// Precedence levels, loosest first, as the canonical form prints them.
const (
	lvlOr = iota + 1
	lvlAnd
	lvlNot
	lvlEquality   // = <> IS NULL
	lvlComparison // < <= > >= BETWEEN IN CONTAINS STARTSWITH ENDSWITH
	lvlUnary      // -x, negative literals
	lvlPrimary    // literals, property names, parenthesised expressions
)

func level(n *node) int {
	switch n.op {
	case opOr:
		return lvlOr
	case opAnd:
		return lvlAnd
	case opNot:
		return lvlNot
	case opCmp:
		if n.cmp == cmpEq || n.cmp == cmpNe {
			return lvlEquality
		}
		return lvlComparison
	case opIsNull:
		return lvlEquality
	case opBetween, opIn, opStr:
		return lvlComparison
	case opNeg:
		return lvlUnary
	case opConst:
		if n.val.kind == kLong && n.val.i < 0 || n.val.kind == kDouble && (n.val.f < 0 || n.val.f == 0 && 1/n.val.f < 0) {
			return lvlUnary
		}
	}
	return lvlPrimary
}

func format(n *node) string {
	var b strings.Builder
	write(&b, n, 0)
	return b.String()
}

// write prints n, in parentheses if it binds looser than min.
func write(b *strings.Builder, n *node, min int) {
	if level(n) < min {
		b.WriteByte('(')
		defer b.WriteByte(')')
	}
	switch n.op {
	case opOr, opAnd:
		sep, kidMin := " OR ", lvlAnd
		if n.op == opAnd {
			sep, kidMin = " AND ", lvlNot
		}
		for i, k := range n.kids {
			if i > 0 {
				b.WriteString(sep)
			}
			write(b, k, kidMin)
		}
	case opNot:
		b.WriteString("NOT ")
		k := n.kids[0]
		if k.op == opNot {
			write(b, k, lvlNot)
		} else {
			write(b, k, lvlPrimary)
		}
	case opCmp:
		lmin, rmin := lvlComparison, lvlUnary
		if n.cmp == cmpEq || n.cmp == cmpNe {
			lmin, rmin = lvlEquality, lvlComparison
		}
		write(b, n.kids[0], lmin)
		b.WriteString(cmpText[n.cmp])
		write(b, n.kids[1], rmin)
	case opIsNull:
		write(b, n.kids[0], lvlEquality)
		if n.not {
			b.WriteString(" IS NOT NULL")
		} else {
			b.WriteString(" IS NULL")
		}
	case opBetween:
		write(b, n.kids[0], lvlComparison)
		b.WriteString(notText(n.not) + "BETWEEN ")
		write(b, n.kids[1], lvlUnary)
		b.WriteString(" AND ")
		write(b, n.kids[2], lvlUnary)
	case opIn:
		write(b, n.kids[0], lvlComparison)
		b.WriteString(notText(n.not) + "IN (")
		for i, s := range n.set {
			if i > 0 {
				b.WriteString(", ")
			}
			writeString(b, s)
		}
		b.WriteByte(')')
	case opStr:
		write(b, n.kids[0], lvlComparison)
		b.WriteString(notText(n.not) + strText[n.str])
		writeString(b, string(n.val.s))
	case opNeg:
		b.WriteByte('-')
		write(b, n.kids[0], lvlPrimary)
	case opProp:
		b.WriteString(n.name)
	case opConst:
		writeValue(b, n.val)
	}
}

var cmpText = [...]string{cmpEq: " = ", cmpNe: " <> ", cmpLt: " < ", cmpLe: " <= ", cmpGt: " > ", cmpGe: " >= "}

var strText = [...]string{strContains: "CONTAINS ", strStartsWith: "STARTSWITH ", strEndsWith: "ENDSWITH "}

func notText(not bool) string {
	if not {
		return " NOT "
	}
	return " "
}

func writeValue(b *strings.Builder, v value) {
	switch v.kind {
	case kNull:
		b.WriteString("NULL")
	case kBool:
		if v.b {
			b.WriteString("TRUE")
		} else {
			b.WriteString("FALSE")
		}
	case kLong:
		b.WriteString(strconv.FormatInt(v.i, 10))
	case kDouble:
		s := strconv.FormatFloat(v.f, 'g', -1, 64)
		b.WriteString(s)
		if !strings.ContainsAny(s, ".e") {
			b.WriteString(".0") // keep it a double when read back
		}
	case kString:
		writeString(b, string(v.s))
	}
}

// writeString prints s as a literal, doubling its quotes.
func writeString(b *strings.Builder, s string) {
	b.WriteByte('\'')
	b.WriteString(strings.ReplaceAll(s, "'", "''"))
	b.WriteByte('\'')
}
