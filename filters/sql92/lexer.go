package sql92

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tInt    // decimal integer literal, optional L suffix
	tFloat  // decimal literal with a fraction or an exponent
	tString // quoted literal; text holds the decoded value
	tLParen
	tRParen
	tComma
	tEq
	tNe
	tLt
	tLe
	tGt
	tGe
	tPlus
	tMinus
	// Keywords, matched without regard to case.
	tNot
	tAnd
	tOr
	tBetween
	tIn
	tTrue
	tFalse
	tNull
	tIs
	tContains
	tStartsWith
	tEndsWith
)

var keywords = map[string]tokKind{
	"NOT":        tNot,
	"AND":        tAnd,
	"OR":         tOr,
	"BETWEEN":    tBetween,
	"IN":         tIn,
	"TRUE":       tTrue,
	"FALSE":      tFalse,
	"NULL":       tNull,
	"IS":         tIs,
	"CONTAINS":   tContains,
	"STARTSWITH": tStartsWith,
	"ENDSWITH":   tEndsWith,
}

// maxKeywordLen is the length of the longest keyword.
const maxKeywordLen = len("STARTSWITH")

type token struct {
	kind     tokKind
	pos, end int    // byte range in the source
	text     string // identifier name, number digits, or decoded string
}

// lex splits src into tokens, ending with one tEOF token.
func lex(src string) ([]token, error) {
	var toks []token
	i := 0
	for {
		// White space and comments.
		for i < len(src) {
			c := src[i]
			switch {
			case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
				i++
				continue
			case strings.HasPrefix(src[i:], "--"):
				if nl := strings.IndexAny(src[i:], "\r\n"); nl >= 0 {
					i += nl
				} else {
					i = len(src)
				}
				continue
			case strings.HasPrefix(src[i:], "/*"):
				end := strings.Index(src[i+2:], "*/")
				if end < 0 {
					return nil, &SyntaxError{Pos: len(src), Expected: `"*/" closing the comment at ` + itoa(i), Found: endOfInput}
				}
				i += 2 + end + 2
				continue
			}
			break
		}
		if i == len(src) {
			return append(toks, token{kind: tEOF, pos: i, end: i}), nil
		}
		start := i
		c := src[i]
		var t token
		switch {
		case isIdentStart(c):
			for i < len(src) && isIdentPart(src[i]) {
				i++
			}
			t = token{kind: tIdent, text: src[start:i]}
			if i-start <= maxKeywordLen {
				var up [maxKeywordLen]byte
				for j := start; j < i; j++ {
					up[j-start] = upper(src[j])
				}
				if k, ok := keywords[string(up[:i-start])]; ok {
					t.kind = k
				}
			}
		case isDigit(c) || (c == '.' && i+1 < len(src) && isDigit(src[i+1])):
			var err error
			t, i, err = lexNumber(src, i)
			if err != nil {
				return nil, err
			}
		case c == '\'':
			var b strings.Builder
			i++
			for {
				j := strings.IndexByte(src[i:], '\'')
				if j < 0 {
					return nil, &SyntaxError{Pos: len(src), Expected: `"'" closing the string at ` + itoa(start), Found: endOfInput}
				}
				b.WriteString(src[i : i+j])
				i += j + 1
				if i < len(src) && src[i] == '\'' { // '' stands for one quote
					b.WriteByte('\'')
					i++
					continue
				}
				break
			}
			t = token{kind: tString, text: b.String()}
		default:
			i++
			switch c {
			case '(':
				t.kind = tLParen
			case ')':
				t.kind = tRParen
			case ',':
				t.kind = tComma
			case '=':
				t.kind = tEq
			case '+':
				t.kind = tPlus
			case '-':
				t.kind = tMinus
			case '<':
				t.kind = tLt
				if i < len(src) && src[i] == '=' {
					t.kind, i = tLe, i+1
				} else if i < len(src) && src[i] == '>' {
					t.kind, i = tNe, i+1
				}
			case '>':
				t.kind = tGt
				if i < len(src) && src[i] == '=' {
					t.kind, i = tGe, i+1
				}
			default:
				return nil, &SyntaxError{Pos: start, Expected: "an operator, a value or a property name", Found: quoteSource(runeAt(src, start))}
			}
		}
		t.pos, t.end = start, i
		toks = append(toks, t)
	}
}

// lexNumber reads a numeric literal starting at src[i]:
//
//	integer = "0" | nonzero { digit } [ "L" | "l" ] .
//	float   = digits "." { digit } [ exponent ] | "." digits [ exponent ] | digits exponent .
//	exponent = ( "E" | "e" ) [ "+" | "-" ] digits .
func lexNumber(src string, i int) (token, int, error) {
	start := i
	digits := func() {
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	digits()
	intEnd := i
	float := false
	if i < len(src) && src[i] == '.' {
		float = true
		i++
		digits()
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		j := i + 1
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if j < len(src) && isDigit(src[j]) {
			float = true
			i = j
			digits()
		}
	}
	if float {
		return token{kind: tFloat, text: src[start:i]}, i, nil
	}
	if intEnd-start > 1 && src[start] == '0' {
		return token{}, 0, &SyntaxError{Pos: start, Expected: "a number without leading zeros", Found: quoteSource(src[start:intEnd])}
	}
	t := token{kind: tInt, text: src[start:intEnd]}
	if i < len(src) && (src[i] == 'L' || src[i] == 'l') {
		i++
	}
	return t, i, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isIdentStart(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '$'
}

func isIdentPart(c byte) bool { return isIdentStart(c) || isDigit(c) }

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

// runeAt returns the (possibly multi-byte) character at src[i:].
func runeAt(src string, i int) string {
	_, n := utf8.DecodeRuneInString(src[i:])
	return src[i : i+n]
}

func itoa(i int) string { return strconv.Itoa(i) }
