package sql92

import (
	"math"
	"regexp"
	"strconv"
	"testing"
)

var (
	intSyntax   = regexp.MustCompile(`^[+-]?[0-9]+$`)
	floatSyntax = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
)

// referenceNumber is parseNumber written the slow, obvious way.
func referenceNumber(s string) (num, bool) {
	if intSyntax.MatchString(s) {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return num{i: i}, true
		}
	}
	if !floatSyntax.MatchString(s) {
		return num{}, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errorsIsRange(err) {
		return num{}, false
	}
	return num{isDouble: true, f: f}, true
}

func errorsIsRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func sameNum(a, b num) bool {
	if a.isDouble != b.isDouble {
		return false
	}
	if a.isDouble {
		return math.Float64bits(a.f) == math.Float64bits(b.f)
	}
	return a.i == b.i
}

var numberSeeds = []string{
	"0", "-0", "+0", "00", "007", "65", "-3", "+5", "2.5", ".5", "5.", "-.5", "+.5e1",
	"1e5", "1E5", "1e+5", "1e-5", "6.5e1", "9223372036854775807", "9223372036854775808",
	"-9223372036854775808", "-9223372036854775809", "99999999999999999999999",
	"0.1", "0.30000000000000004", "123456789012345678901234567890.5", "1.7976931348623157e308",
	"1.7976931348623159e308", "1e308", "1e309", "2e308", "4.9e-324", "2e-324", "1e-400", "1e-330",
	"0.000000000000000000000000000000000000001", "3.14159265358979323846264338327950288",
	"1e999999999999999999999", "1e-999999999999999999999", "0e999999999", "0.0e-999",
	"9007199254740993", "9007199254740993.0", "1234567890123456789e3", "12345678901234567890e-3",
	"", "-", "+", ".", "e5", "1e", "1e+", "1.2.3", "1..2", " 5", "5 ", "0x10", "1_000", "NaN",
	"Infinity", "inf", "1d", "5L", "--5", "+-5", "1e5.5", "١٢",
}

// checkSmallInt holds parseSmallInt to parseNumber: where it reads a
// number, parseNumber reads the same long.
func checkSmallInt(t *testing.T, s string) {
	t.Helper()
	if x, ok := parseSmallInt([]byte(s)); ok {
		if want, wok := parseNumber([]byte(s)); !wok || want.isDouble || want.i != x {
			t.Fatalf("parseSmallInt(%q) = %d, parseNumber gives %+v %v", s, x, want, wok)
		}
	}
}

func TestParseNumber(t *testing.T) {
	for _, s := range append(numberSeeds, "999999999999999999", "-999999999999999999", "+0", "-0", "007") {
		checkSmallInt(t, s)
	}
	for _, s := range numberSeeds {
		got, ok := parseNumber([]byte(s))
		want, wok := referenceNumber(s)
		if ok != wok || ok && !sameNum(got, want) {
			t.Errorf("parseNumber(%q) = %+v %v, want %+v %v", s, got, ok, want, wok)
		}
	}
}

func FuzzParseNumber(f *testing.F) {
	for _, s := range numberSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkSmallInt(t, s)
		got, ok := parseNumber([]byte(s))
		want, wok := referenceNumber(s)
		if ok != wok || ok && !sameNum(got, want) {
			t.Fatalf("parseNumber(%q) = %+v %v, want %+v %v", s, got, ok, want, wok)
		}
	})
}
