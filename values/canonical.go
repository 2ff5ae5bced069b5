package values

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/listgate/listgate/errkind"
)

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
	return e.msg + " at " + errkind.Clip(p)
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
