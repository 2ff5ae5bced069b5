// Package values turns GraphQL ListValue inputs into the canonical bytes a
// list stores, and stored bytes back into JSON, by the feature's value type.
// Canonical means equal values always give equal bytes, so they hash to the
// same item key: INT, FLOAT and BOOLEAN as their shortest JSON text, STRING
// as its UTF-8 bytes, BYTES as the decoded bytes, JSON as RFC 8785 (JCS)
// canonical JSON. It is pure and never panics on any input.
package values

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/listgate/listgate/store"
)

// Encode returns the canonical bytes of v, a value as GraphQL decodes it
// (string, bool, int64, float64, json.Number, map[string]any, []any, nil),
// for a feature whose values are of type t.
func Encode(t store.ValueType, v any) ([]byte, error) {
	switch t {
	case store.String:
		s, ok := v.(string)
		if !ok {
			return nil, mismatch(t, v, "a string")
		}
		return []byte(s), nil
	case store.Int:
		n, ok := integer(v)
		if !ok {
			return nil, mismatch(t, v, "an integer from -9223372036854775808 to 9223372036854775807")
		}
		return strconv.AppendInt(nil, n, 10), nil
	case store.Float:
		f, ok := float(v)
		if !ok {
			return nil, mismatch(t, v, "a finite number")
		}
		return appendFloat(nil, f), nil
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
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%w ListValue: not a JSON value: %v", store.ErrInvalid, err)
		}
		val := jsontext.Value(raw)
		if err := val.Canonicalize(); err != nil {
			return nil, fmt.Errorf("%w ListValue: not a JSON value: %v", store.ErrInvalid, err)
		}
		return val, nil
	}
	return nil, fmt.Errorf("%w value type %q", store.ErrInvalid, t)
}

func mismatch(t store.ValueType, v any, want string) error {
	return fmt.Errorf("%w ListValue %s: this feature holds %s values, which must be %s", store.ErrInvalid, describe(v), t, want)
}

// describe names an input value for an error message, briefly.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		return strconv.Quote(v)
	case map[string]any:
		return "(an object)"
	case []any:
		return "(a list)"
	default:
		s := fmt.Sprint(v)
		if len(s) > 40 {
			s = s[:40] + "…"
		}
		return s
	}
}

func integer(v any) (int64, bool) {
	switch v := v.(type) {
	case int64:
		return v, true
	case int:
		return int64(v), true
	case json.Number:
		n, err := strconv.ParseInt(string(v), 10, 64)
		return n, err == nil
	case float64:
		if v == math.Trunc(v) && v >= -(1<<63) && v < 1<<63 {
			return int64(v), true
		}
	}
	return 0, false
}

func float(v any) (float64, bool) {
	var f float64
	switch v := v.(type) {
	case float64:
		f = v
	case int64:
		f = float64(v)
	case int:
		f = float64(v)
	case json.Number:
		var err error
		if f, err = strconv.ParseFloat(string(v), 64); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return f, !math.IsNaN(f) && !math.IsInf(f, 0)
}

// appendFloat writes f as ECMAScript (and RFC 8785) does, with -0 as 0.
func appendFloat(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0')
	}
	val := jsontext.Value(strconv.AppendFloat(nil, f, 'g', -1, 64))
	if err := val.Canonicalize(); err != nil {
		// Unreachable for finite floats; keep Go's spelling.
		return append(dst, strconv.FormatFloat(f, 'g', -1, 64)...)
	}
	return append(dst, val...)
}

// Check reports whether stored bytes are a well-formed value of type t, so
// that AppendJSON writes valid JSON. Rows written by other tools may not be.
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
		ok = jsontext.Value(b).IsValid()
	}
	if !ok {
		return fmt.Errorf("stored value is not a valid %s value", t)
	}
	return nil
}

func isJSONNumber(b []byte) bool {
	v := jsontext.Value(b)
	return v.Kind() == '0' && v.IsValid()
}

// AppendJSON appends the JSON form of stored bytes of type t, which Check
// accepted.
func AppendJSON(dst []byte, t store.ValueType, b []byte) []byte {
	switch t {
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

// MarshalGQL writes the value as JSON.
func (v Value) MarshalGQL(w io.Writer) {
	var buf [128]byte
	w.Write(AppendJSON(buf[:0], v.Type, v.Bytes))
}

// UnmarshalGQL keeps the input for Encode.
func (v *Value) UnmarshalGQL(in any) error {
	v.Raw = in
	return nil
}
