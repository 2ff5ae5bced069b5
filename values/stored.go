package values

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/listgate/listgate/store"
)

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

// WrittenLen is the length of the JSON a response carries for stored bytes
// of type t: AppendJSON's, once the response escapes <, >, & and U+2028,
// U+2029 as encoding/json does (endpoint's writeResponse). What bounds a
// response (--max-response-bytes) is counted so.
func WrittenLen(t store.ValueType, b []byte) int {
	switch t {
	case store.Int:
		if safeIntText(b) {
			return len(b)
		}
		return len(b) + 2
	case store.Bytes:
		return 2 + base64.StdEncoding.EncodedLen(len(b))
	case store.String:
		n := 2 + len(b)
		for i := 0; i < len(b); i++ {
			switch c := b[i]; {
			case c == '"' || c == '\\' || c == '\b' || c == '\t' || c == '\n' || c == '\f' || c == '\r':
				n++
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 5
			case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && b[i+2]&^1 == 0xA8:
				n += 3
				i += 2
			}
		}
		return n
	case store.JSON:
		n := len(b)
		for i := 0; i < len(b); i++ {
			switch c := b[i]; {
			case c == '<' || c == '>' || c == '&':
				n += 5
			case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && b[i+2]&^1 == 0xA8:
				n += 3
				i += 2
			}
		}
		return n
	}
	return len(b)
}
