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
		// Strict decoding still skips line breaks; the canonical text has
		// none, so that one value has one spelling.
		b, err := base64.StdEncoding.Strict().DecodeString(s)
		if err != nil || strings.ContainsAny(s, "\r\n") {
			return nil, mismatch(t, v, "a standard base64 string (with padding, without line breaks)")
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
	return nil, fmt.Errorf("%w value type %s", errkind.Invalid, errkind.Quote(string(t)))
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
		return errkind.Quote(v)
	case json.Number:
		return errkind.Clip(string(v))
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case map[string]any:
		return "(an object)"
	case []any:
		return "(a list)"
	default:
		return errkind.Clip(fmt.Sprint(v))
	}
}
