package values

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
)

// encodeInt: numbers within ±MaxSafeInteger without fraction or exponent,
// or strings of canonical int64 digits.
func encodeInt(v any) ([]byte, error) {
	const (
		want   = "an integer: a number within ±9007199254740991, or beyond it a string of its decimal digits, e.g. \"9007199254740993\""
		no64   = "64-bit integers, from -9223372036854775808 to 9223372036854775807 (beyond ±9007199254740991 sent as strings of decimal digits, e.g. \"9007199254740993\")"
		noFrac = "integers written without a fraction or exponent (e.g. 100, not 1e2 or 100.0)"
	)
	var n int64
	switch v := v.(type) {
	case int64:
		n = v
	case int:
		n = int64(v)
	case json.Number:
		var st intStatus
		n, st = parseInt(string(v))
		switch st {
		case intRange:
			return nil, mismatch(store.Int, v, no64)
		case intSyntax:
			if _, ok := parseNumber(string(v)); ok {
				return nil, mismatch(store.Int, v, noFrac)
			}
			return nil, mismatch(store.Int, v, want)
		}
	case float64:
		return nil, fmt.Errorf("%w ListValue %s (written with a fraction or exponent): this feature holds INT values, which must be %s", errkind.Invalid, describe(v), noFrac)
	case string:
		n, st := parseInt(v)
		switch {
		case st == intRange:
			return nil, mismatch(store.Int, v, no64)
		case st != intOK || v == "-0":
			return nil, fmt.Errorf("%w ListValue %s: this feature holds INT values; an integer sent as a string must be its canonical decimal digits (-?(0|[1-9][0-9]*): no \"+\", leading zeros, spaces, fraction or exponent), e.g. \"9007199254740993\"", errkind.Invalid, describe(v))
		}
		return strconv.AppendInt(nil, n, 10), nil
	default:
		return nil, mismatch(store.Int, v, want)
	}
	if n > MaxSafeInteger || n < -MaxSafeInteger {
		return nil, fmt.Errorf("%w ListValue %d: this feature holds INT values; integers beyond ±9007199254740991 must be sent as strings, e.g. \"%d\", since a JavaScript number cannot hold them exactly", errkind.Invalid, n, n)
	}
	return strconv.AppendInt(nil, n, 10), nil
}

type intStatus uint8

const (
	intOK     intStatus = iota
	intSyntax           // not -?(0|[1-9][0-9]*)
	intRange            // the syntax, beyond int64
)

// parseInt reads -?(0|[1-9][0-9]*) within int64, in one pass.
func parseInt(s string) (int64, intStatus) {
	i, neg := 0, false
	if i < len(s) && s[i] == '-' {
		neg = true
		i++
	}
	if i == len(s) || s[i] < '0' || s[i] > '9' || s[i] == '0' && len(s) > i+1 {
		return 0, intSyntax
	}
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	var u uint64
	over := false
	for ; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, intSyntax
		}
		if !over {
			if u > (limit-uint64(c-'0'))/10 {
				over = true
			} else {
				u = u*10 + uint64(c-'0')
			}
		}
	}
	if over {
		return 0, intRange
	}
	if neg {
		return -int64(u), intOK // int64(1<<63) wraps, and its negation is -(1<<63)
	}
	return int64(u), intOK
}

func encodeFloat(v any) ([]byte, error) {
	var f float64
	switch v := v.(type) {
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, mismatch(store.Float, v, "a finite number")
		}
		f = v
	case int64:
		if !exactInt(v) {
			return nil, floatInexact(v, strconv.FormatInt(v, 10), float64(v))
		}
		f = float64(v)
	case int:
		if !exactInt(int64(v)) {
			return nil, floatInexact(v, strconv.Itoa(v), float64(v))
		}
		f = float64(v)
	case json.Number:
		var st numStatus
		if f, st = exactFloat(string(v)); st != numExact {
			if st == numSyntax {
				return nil, mismatch(store.Float, v, "a finite number")
			}
			g, _ := strconv.ParseFloat(string(v), 64)
			return nil, floatInexact(v, string(v), g)
		}
	default:
		return nil, mismatch(store.Float, v, "a finite number")
	}
	return appendFloat(nil, f), nil
}

func floatInexact(v any, text string, nearest float64) error {
	hint := ""
	switch {
	case math.IsInf(nearest, 0):
		hint = " (its magnitude is beyond 1.7976931348623157e+308)"
	case nearest == 0:
		hint = " (its magnitude is below 5e-324)"
	default:
		hint = ": the nearest it holds is " + string(appendFloat(nil, nearest))
	}
	return fmt.Errorf("%w ListValue %s: this feature holds FLOAT values, 64-bit floats (what JavaScript clients use), which cannot hold %s exactly%s; send a number it holds, as JavaScript writes it", errkind.Invalid, describe(v), errkind.Clip(text), hint)
}

// CheckNumber reports whether text, a JSON number, is held exactly by a
// 64-bit float, the number type of JavaScript, in the round-trip sense: the
// decimal value of text equals the value of the shortest decimal that
// reads back as the same float64 (JavaScript's own spelling of it). So
// "0.1", "1.0", "100", "1e2" and "-0" pass, while "9007199254740993",
// "0.1000000000000000000001", "1e400" and "1e-400" do not: JavaScript would
// read them as 9007199254740992, 0.1, Infinity and 0. It runs in time
// linear in len(text), whatever the exponent. The error wraps
// errkind.Invalid.
func CheckNumber(text string) error {
	if _, st := exactFloat(text); st != numExact {
		return fmt.Errorf("%w %s", errkind.Invalid, numberProblem(text, st))
	}
	return nil
}

func numberProblem(text string, st numStatus) string {
	if st == numSyntax {
		return "number " + strconv.Quote(errkind.Clip(text)) + ": not a JSON number"
	}
	return "number " + errkind.Clip(text) + " cannot be held exactly by a 64-bit float (what JavaScript clients use); send it as a string"
}

type numStatus uint8

const (
	numExact   numStatus = iota
	numSyntax            // not a JSON number
	numInexact           // a JSON number a float64 does not hold exactly
)

// decimal is the value of a JSON number: zero, or ±0.d₁d₂…dₙ × 10^exp with
// d₁ and dₙ nonzero (the first maxDigits of them kept).
type decimal struct {
	neg    bool
	zero   bool
	n      int
	exp    int64
	digits [maxDigits]byte
}

// maxDigits is the most significant digits the shortest decimal of a
// float64 has.
const maxDigits = 17

// parseNumber reads a JSON number (RFC 8259) in one pass. Exponents
// saturate, far beyond any float64's, so huge ones cost nothing extra.
func parseNumber[T ~string | ~[]byte](s T) (d decimal, ok bool) {
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	intStart := i
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
	default:
		return d, false
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(s) && s[i] == '.' {
		i++
		fracStart = i
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
		if i == fracStart {
			return d, false
		}
		fracEnd = i
	}
	var x int64
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		neg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			neg = s[i] == '-'
			i++
		}
		start := i
		for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			if x < 1<<40 {
				x = x*10 + int64(s[i]-'0')
			}
		}
		if i == start {
			return d, false
		}
		if neg {
			x = -x
		}
	}
	if i != len(s) {
		return d, false
	}
	// The digits of the integer and fraction parts, as one sequence.
	pos, first, last := 0, -1, -1
	for _, r := range [2][2]int{{intStart, intEnd}, {fracStart, fracEnd}} {
		for j := r[0]; j < r[1]; j++ {
			c := s[j]
			if c != '0' {
				if first < 0 {
					first = pos
				}
				last = pos
			}
			if first >= 0 && pos-first < maxDigits {
				d.digits[pos-first] = c
			}
			pos++
		}
	}
	if first < 0 {
		d.zero = true
		return d, true
	}
	d.n = last - first + 1
	d.exp = x + int64(intEnd-intStart) - int64(first)
	return d, true
}

func (d *decimal) equal(e *decimal) bool {
	if d.zero || e.zero {
		return d.zero == e.zero
	}
	return d.neg == e.neg && d.n == e.n && d.exp == e.exp && d.n <= maxDigits &&
		string(d.digits[:d.n]) == string(e.digits[:e.n])
}

// exactFloat parses text, a JSON number, if a float64 holds it exactly in
// CheckNumber's sense.
func exactFloat(text string) (float64, numStatus) {
	d, ok := parseNumber(text)
	switch {
	case !ok:
		return 0, numSyntax
	case d.zero:
		return 0, numExact
	// 0.17976931348623157e309 is the largest float64, 0.5e-323 the least.
	case d.n > maxDigits || d.exp > 309 || d.exp < -323:
		return 0, numInexact
	}
	// Parse the significant digits alone, so the cost is bounded
	// whatever zeros pad text.
	var buf [48]byte
	b := buf[:0]
	if d.neg {
		b = append(b, '-')
	}
	b = append(b, d.digits[:d.n]...)
	b = append(b, 'e')
	b = strconv.AppendInt(b, d.exp-int64(d.n), 10)
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return 0, numInexact
	}
	short, _ := parseNumber(strconv.AppendFloat(buf[:0], f, 'e', -1, 64))
	if !d.equal(&short) {
		return 0, numInexact
	}
	return f, numExact
}

// exactInt reports whether a float64 holds n exactly in CheckNumber's
// sense, so that it reads back as the same digits.
func exactInt(n int64) bool {
	if -(1<<53) <= n && n <= 1<<53 {
		return true
	}
	var buf [24]byte
	_, st := exactFloat(string(strconv.AppendInt(buf[:0], n, 10)))
	return st == numExact
}
