package sql92

import (
	"errors"
	"fmt"
	"strconv"
)

// Limits that keep compiling bounded on hostile input.
const (
	// MaxExprLen is the longest expression Compile accepts, in bytes.
	MaxExprLen = 16 << 10
	// MaxDepth bounds how deeply an expression nests: parentheses, NOT and
	// sign chains, and chained comparisons such as a = b = c all count. It
	// bounds the recursion of Compile, Eval and String.
	MaxDepth = 100
)

// Errors of this package. Compile returns ErrTooLong (wrapped) for an
// over-long expression and a *SyntaxError for everything else.
var (
	// ErrTooLong is returned for an expression longer than MaxExprLen.
	ErrTooLong = errors.New("sql92: expression too long")
)

// SyntaxError reports an expression Compile cannot accept: a grammar error,
// an operand of the wrong type (a > 'x'), or an expression nested deeper
// than MaxDepth.
type SyntaxError struct {
	// Pos is the byte offset in the expression where the problem starts;
	// len(expression) for the end of input.
	Pos int
	// Expected says what would have been accepted at Pos, e.g. `")"` or
	// "a value".
	Expected string
	// Found describes what is at Pos, e.g. `"AND"` or "end of input".
	Found string
}

// Error returns, for example, `sql92: at 12: expected ")" but found end of
// input`.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("sql92: at %d: expected %s but found %s", e.Pos, e.Expected, e.Found)
}

const endOfInput = "end of input"

// quoteSource describes a piece of the expression for Found, shortened if
// it is long.
func quoteSource(s string) string {
	const max = 40
	if len(s) > max {
		s = s[:max] + "..."
	}
	return strconv.Quote(s)
}
