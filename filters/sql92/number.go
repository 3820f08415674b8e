package sql92

import (
	"math"
	"strconv"
	"unsafe"
)

// num is a number: a long, or a double when isDouble.
type num struct {
	isDouble bool
	i        int64
	f        float64
}

// numCompare compares two numbers: exactly when both are longs, else as
// doubles (a long converted to the nearest double, as Java does).
func numCompare(x, y num) int {
	if !x.isDouble && !y.isDouble {
		return cmp3(x.i, y.i)
	}
	return cmp3(x.double(), y.double())
}

func (x num) double() float64 {
	if x.isDouble {
		return x.f
	}
	return float64(x.i)
}

func cmp3[T int64 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// parseSmallInt reads text of 1 to 18 decimal digits, with an optional
// sign, as the long parseNumber reads it; ok is false for anything else,
// which parseNumber then reads.
func parseSmallInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var x int64
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		x = x*10 + int64(c-'0')
	}
	if neg {
		x = -x
	}
	return x, true
}

// parseNumber reads a property's text as a number without allocating:
//
//	number   = [ "+" | "-" ] ( digits [ "." { digit } ] | "." digits ) [ exponent ] .
//	exponent = ( "e" | "E" ) [ "+" | "-" ] digits .
//
// Text without a fraction or an exponent that fits in an int64 is a long;
// any other number is a double (±Inf beyond the double range). Anything
// else, white space included, is not a number.
func parseNumber(b []byte) (num, bool) {
	i := 0
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	var (
		mant    uint64 // the first 19 significant digits
		nd      int    // significant digits (leading zeros skipped)
		digits  int    // all mantissa digits
		frac    int    // all digits after the point
		inexact bool   // a nonzero digit beyond the 19 kept
		isFloat bool
	)
	for ; i < len(b); i++ {
		c := b[i]
		if c == '.' && !isFloat {
			isFloat = true
			continue
		}
		if !isDigit(c) {
			break
		}
		digits++
		if isFloat {
			frac++
		}
		if nd == 0 && c == '0' {
			continue
		}
		if nd < 19 {
			mant = mant*10 + uint64(c-'0')
		} else if c != '0' {
			inexact = true
		}
		nd++
	}
	if digits == 0 {
		return num{}, false
	}
	exp := 0
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		isFloat = true
		i++
		eneg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			eneg = b[i] == '-'
			i++
		}
		start := i
		for ; i < len(b) && isDigit(b[i]); i++ {
			if exp < 1e6 { // saturate far beyond any double's range
				exp = exp*10 + int(b[i]-'0')
			}
		}
		if i == start {
			return num{}, false
		}
		if eneg {
			exp = -exp
		}
	}
	if i != len(b) {
		return num{}, false
	}
	if !isFloat && nd <= 19 {
		if !neg && mant <= math.MaxInt64 {
			return num{i: int64(mant)}, true
		}
		if neg && mant <= 1<<63 {
			return num{i: int64(-mant)}, true // wraps to MinInt64 for 1<<63
		}
	}
	var f float64
	if nd > 0 {
		// The value is mant × 10^e10, or just above it when inexact, and
		// lies in [10^(magnitude-1), 10^magnitude).
		e10 := exp - frac + max(nd-19, 0)
		magnitude := nd + exp - frac
		var ok bool
		if !inexact {
			f, ok = fastFloat(mant, e10)
		}
		switch {
		case ok:
		case magnitude > 309: // at least 1e309: beyond the largest double
			f = math.Inf(1)
		case magnitude < -330: // below half the smallest denormal
			f = 0
		default:
			// b is a valid decimal number, so ParseFloat fails at most
			// with a range error, whose value (±Inf) is still right; that
			// error, for text between the largest double and 1e309, is
			// the one allocation evaluation can make. The string aliases
			// b only for this call: strconv keeps no reference to it.
			f, _ = strconv.ParseFloat(unsafe.String(&b[0], len(b)), 64)
			return num{isDouble: true, f: f}, true
		}
	}
	if neg {
		f = -f
	}
	return num{isDouble: true, f: f}, true
}

// float64pow10 holds the powers of ten that a float64 represents exactly.
var float64pow10 = [...]float64{
	1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9,
	1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
	1e20, 1e21, 1e22,
}

// fastFloat computes mant × 10^e10 exactly when both factors are exact
// doubles, so one correctly rounded operation gives the right answer.
func fastFloat(mant uint64, e10 int) (float64, bool) {
	if mant>>53 != 0 || e10 < -22 || e10 > 22 {
		return 0, false
	}
	f := float64(mant)
	if e10 < 0 {
		return f / float64pow10[-e10], true
	}
	return f * float64pow10[e10], true
}
