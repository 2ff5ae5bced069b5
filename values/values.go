// Package values turns GraphQL ListValue inputs into the canonical bytes a
// list stores, and stored bytes back into JSON, by the feature's value type.
//
// The rule: a value is stored and read back exactly as a JavaScript client
// sees it, or refused with an error (wrapping errkind.Invalid) that says
// what to send instead. Nothing is rounded, clamped or replaced.
//
//   - INT (64-bit integers) travel as JSON numbers within ±(2^53−1)
//     (±9007199254740991, Number.MAX_SAFE_INTEGER) and as JSON strings of
//     their decimal digits beyond it, both ways, like protobuf's JSON
//     mapping. Accepted: an integer number within that range, written
//     without a fraction or exponent, or a string of canonical decimal
//     digits (-?(0|[1-9][0-9]*), not "-0") from -9223372036854775808 to
//     9223372036854775807; a string within the safe range reads back as a
//     number. Refused: numbers beyond the safe range, numbers with a
//     fraction or exponent (1e2, 100.0: send 100), other strings.
//   - FLOAT values and every number inside a JSON value must be held
//     exactly by a 64-bit float (JavaScript's number) in the round-trip
//     sense of CheckNumber: JavaScript writes them back with the same
//     value. 0.1, 1.0 and 1e2 are fine; 9007199254740993, 2^60 written
//     as 1152921504606846976 (JavaScript writes 1152921504606847000),
//     1e400, 1e-400 and 0.1000000000000000000001 are refused, whether
//     they come as literals or variables. They read back in JavaScript's
//     shortest form (1.50 as 1.5, 1e21 as 1e+21, -0 as 0); to keep other
//     numbers exactly, send them as strings (or use an INT feature).
//   - Strings (STRING values, and strings and object keys inside JSON) must
//     be valid UTF-8; lone surrogates and invalid bytes are refused, never
//     replaced with U+FFFD. JSON values nest at most 64 levels deep (MaxJSONDepth).
//
// Canonical means equal values always give equal bytes, so they hash to the
// same item key: INT, FLOAT and BOOLEAN as their shortest JSON text (an INT
// always as its decimal digits, whichever way it traveled), STRING as its
// UTF-8 bytes, BYTES as the decoded bytes, JSON as RFC 8785 (JCS) canonical
// JSON. It is pure and never panics on any input.
package values

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
)

// MaxSafeInteger is the largest integer a JavaScript number holds exactly,
// 2^53−1. INT values beyond ±MaxSafeInteger travel as strings.
const MaxSafeInteger = 1<<53 - 1

// MaxJSONDepth is how deeply a JSON value may nest. Clients and their JSON
// parsers have limits of their own (encoding/json 10,000, some far fewer),
// and a response must encode wherever the value goes.
const MaxJSONDepth = 64

// Encode returns the canonical bytes of v, a value as GraphQL decodes it
// (string, bool, int64, float64, json.Number, map[string]any, []any, nil),
// for a feature whose values are of type t, or an error wrapping
// errkind.Invalid that says what to send instead if v would not read back
// exactly as a JavaScript client sees it (see the package comment).
func Encode(t store.ValueType, v any) ([]byte, error) {
	switch t {
	case store.String:
		s, ok := v.(string)
		if !ok {
			return nil, mismatch(t, v, "a string")
		}
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("%w ListValue %s: this feature holds STRING values, which must be valid UTF-8 (no invalid bytes or lone surrogates); send binary data to a BYTES feature as base64", errkind.Invalid, describe(v))
		}
		return []byte(s), nil
	case store.Int:
		return encodeInt(v)
	case store.Float:
		return encodeFloat(v)
	case store.Boolean:
		b, ok := v.(bool)
		if !ok {
			return nil, mismatch(t, v, "true or false")
		}
		return strconv.AppendBool(nil, b), nil
	case store.Bytes:
		s, ok := v.(string)
		if !ok {
			return nil, mismatch(t, v, "a standard base64 string")
		}
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil {
			return nil, mismatch(t, v, "a standard base64 string (with padding)")
		}
		return b, nil
	case store.JSON:
		if v == nil {
			return nil, mismatch(t, v, "a JSON value other than null")
		}
		if err := checkJSON(v, 0); err != nil {
			return nil, fmt.Errorf("%w ListValue %s: this feature holds JSON values; %s", errkind.Invalid, describe(v), err.Error())
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w ListValue %s: not a JSON value: %v", errkind.Invalid, describe(v), err)
		}
		val := jsontext.Value(raw)
		if err := val.Canonicalize(); err != nil {
			return nil, fmt.Errorf("%w ListValue %s: not a JSON value: %v", errkind.Invalid, describe(v), err)
		}
		return val, nil
	}
	return nil, fmt.Errorf("%w value type %q", errkind.Invalid, t)
}

func mismatch(t store.ValueType, v any, want string) error {
	return fmt.Errorf("%w ListValue %s: this feature holds %s values, which must be %s", errkind.Invalid, describe(v), t, want)
}

// describe names an input value for an error message, briefly.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(clip(v))
	case json.Number:
		return clip(string(v))
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case map[string]any:
		return "(an object)"
	case []any:
		return "(a list)"
	default:
		return clip(fmt.Sprint(v))
	}
}

// clip shortens s to about 40 bytes, at a character boundary.
func clip(s string) string {
	if len(s) <= 40 {
		return s
	}
	n := 40
	for n > 36 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

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
	return fmt.Errorf("%w ListValue %s: this feature holds FLOAT values, 64-bit floats (what JavaScript clients use), which cannot hold %s exactly%s; send a number it holds, as JavaScript writes it", errkind.Invalid, describe(v), clip(text), hint)
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
		return "number " + strconv.Quote(clip(text)) + ": not a JSON number"
	}
	return "number " + clip(text) + " cannot be held exactly by a 64-bit float (what JavaScript clients use); send it as a string"
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

// pathError is a refusal inside a JSON value, at a JSON Pointer path
// built as the walk unwinds.
type pathError struct {
	rev []string // path elements, innermost first
	msg string
}

func (e *pathError) Error() string {
	var b strings.Builder
	for i := len(e.rev) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(e.rev[i]))
	}
	p := b.String()
	if p == "" {
		return e.msg
	}
	return e.msg + " at " + clip(p)
}

// checkJSON refuses what would not read back exactly: numbers a float64
// does not hold exactly, strings and keys that are not valid UTF-8, and
// anything that is not a JSON value.
//
// depth is the number of arrays and objects around v; an array or object
// adds one, so the count matches the brackets Check counts in stored bytes.
func checkJSON(v any, depth int) *pathError {
	switch v.(type) {
	case []any, map[string]any:
		if depth+1 > MaxJSONDepth {
			return &pathError{msg: fmt.Sprintf("it nests deeper than %d levels", MaxJSONDepth)}
		}
	}
	switch v := v.(type) {
	case nil, bool:
	case string:
		if !utf8.ValidString(v) {
			return &pathError{msg: fmt.Sprintf("string %s is not valid UTF-8 (invalid bytes or a lone surrogate); send binary data as base64", describe(v))}
		}
	case json.Number:
		if _, st := exactFloat(string(v)); st != numExact {
			return &pathError{msg: numberProblem(string(v), st)}
		}
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return &pathError{msg: fmt.Sprintf("%v is not a JSON number", v)}
		}
	case int64:
		if !exactInt(v) {
			return &pathError{msg: numberProblem(strconv.FormatInt(v, 10), numInexact)}
		}
	case int:
		if !exactInt(int64(v)) {
			return &pathError{msg: numberProblem(strconv.Itoa(v), numInexact)}
		}
	case []any:
		for i, e := range v {
			if err := checkJSON(e, depth+1); err != nil {
				err.rev = append(err.rev, strconv.Itoa(i))
				return err
			}
		}
	case map[string]any:
		for k, e := range v {
			if !utf8.ValidString(k) {
				return &pathError{msg: fmt.Sprintf("object key %s is not valid UTF-8 (invalid bytes or a lone surrogate)", describe(k))}
			}
			if err := checkJSON(e, depth+1); err != nil {
				err.rev = append(err.rev, k)
				return err
			}
		}
	default:
		return &pathError{msg: fmt.Sprintf("%s (%T) is not a JSON value", describe(v), v)}
	}
	return nil
}

// appendFloat writes f, finite, as ECMAScript's Number::toString (and so
// RFC 8785) does, with -0 as 0: the shortest digits that read back as f,
// in positional form from 1e-7 to 1e21 and exponential form beyond.
func appendFloat(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	var buf [32]byte
	d, _ := parseNumber(strconv.AppendFloat(buf[:0], f, 'e', -1, 64))
	if d.neg {
		dst = append(dst, '-')
	}
	digits, k, n := d.digits[:d.n], int64(d.n), d.exp // f = 0.digits × 10^n
	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, n-1, 10)
	}
	return dst
}

// Check reports whether stored bytes are a well-formed value of type t, so
// that AppendJSON writes valid JSON. Rows written by other tools may not be.
// It accepts any int64 text as an INT (AppendJSON quotes those beyond
// ±MaxSafeInteger) and any finite JSON number as a FLOAT.
func Check(t store.ValueType, b []byte) error {
	ok := false
	switch t {
	case store.String:
		ok = utf8.Valid(b)
	case store.Int:
		_, err := strconv.ParseInt(string(b), 10, 64)
		ok = err == nil && isJSONNumber(b)
	case store.Float:
		f, err := strconv.ParseFloat(string(b), 64)
		ok = err == nil && !math.IsInf(f, 0) && isJSONNumber(b)
	case store.Boolean:
		ok = string(b) == "true" || string(b) == "false"
	case store.Bytes:
		ok = true
	case store.JSON:
		ok = jsontext.Value(b).IsValid() && jsonDepth(b) <= MaxJSONDepth
	}
	if !ok {
		return fmt.Errorf("stored value is not a valid %s value", t)
	}
	return nil
}

// jsonDepth is the deepest nesting of arrays and objects in valid JSON.
func jsonDepth(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			depth++
			deepest = max(deepest, depth)
		case c == ']' || c == '}':
			depth--
		}
	}
	return deepest
}

// safeIntText reports whether b, int64 text without leading zeros, is
// within ±MaxSafeInteger, without parsing it.
func safeIntText(b []byte) bool {
	if len(b) > 0 && b[0] == '-' {
		b = b[1:]
	}
	const max = "9007199254740991"
	return len(b) < len(max) || len(b) == len(max) && string(b) <= max
}

func isJSONNumber(b []byte) bool {
	v := jsontext.Value(b)
	return v.Kind() == '0' && v.IsValid()
}

// AppendJSON appends the JSON form of stored bytes of type t, which Check
// accepted: an INT as a number within ±MaxSafeInteger and as a string of
// its digits beyond, BYTES as a standard base64 string, STRING as a JSON
// string, the others as stored.
func AppendJSON(dst []byte, t store.ValueType, b []byte) []byte {
	switch t {
	case store.Int:
		if safeIntText(b) {
			return append(dst, b...)
		}
		dst = append(dst, '"')
		dst = append(dst, b...)
		return append(dst, '"')
	case store.String:
		out, err := jsontext.AppendQuote(dst, b)
		if err != nil {
			return strconv.AppendQuote(dst, string(b))
		}
		return out
	case store.Bytes:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, b)
		return append(dst, '"')
	default:
		return append(dst, b...)
	}
}

// Value is the GraphQL ListValue scalar. Read from a list it holds stored
// bytes and their type; received from a client it holds the raw input,
// which Encode checks once the feature (and so the type) is known.
type Value struct {
	Type  store.ValueType
	Bytes []byte
	Raw   any
}

// MarshalGQL writes the value as JSON, as AppendJSON does.
func (v Value) MarshalGQL(w io.Writer) {
	var buf [128]byte
	w.Write(AppendJSON(buf[:0], v.Type, v.Bytes))
}

// UnmarshalGQL keeps the input for Encode.
func (v *Value) UnmarshalGQL(in any) error {
	v.Raw = in
	return nil
}
