package values

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/listgate/listgate/store"
)

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

var allTypes = []store.ValueType{store.String, store.Int, store.Float, store.Boolean, store.Bytes, store.JSON}

// Any JSON input either encodes, with bytes that pass Check, re-encode to
// themselves, and print as valid JSON, or is rejected; nothing panics.
// What Encode accepts reads back exactly in JavaScript: the output parsed
// with float64 numbers (JSON.parse), written again (JSON.stringify) and
// encoded gives the same bytes. And a value written as a GraphQL literal
// (int64, float64) encodes as the same value written as a variable.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{`"story1"`, `42`, `-0.0`, `1e21`, `true`, `"AAH/"`, `{"b":1,"a":[null]}`, `null`, `"\ud800"`,
		`9007199254740993`, `"9007199254740993"`, `"-9223372036854775808"`, `1e2`, `1e400`, `1e-400`, `0.1000000000000000000001`,
		`{"id":9007199254740993}`, `[1152921504606846976]`, `"007"`, `123456789012345680000`, `5e-324`, "\xff", "9007199254740993"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		// The input itself as a string, which may not be valid UTF-8.
		checkEncode(t, input, input, nil, false)
		var v any
		if decode(input, &v) != nil {
			return
		}
		lit, isLit := literal(v)
		checkEncode(t, input, v, lit, isLit)
	})
}

func checkEncode(t *testing.T, input string, v, lit any, isLit bool) {
	t.Helper()
	for _, typ := range allTypes {
		b, err := Encode(typ, v)
		if isLit {
			lb, lerr := Encode(typ, lit)
			if (err == nil) != (lerr == nil) || !bytes.Equal(b, lb) {
				t.Fatalf("%s %s: variable -> %q, %v; literal %#v -> %q, %v", typ, input, b, err, lit, lb, lerr)
			}
		}
		if err != nil {
			continue
		}
		if err := Check(typ, b); err != nil {
			t.Fatalf("%s %s: encoded %q fails Check: %v", typ, input, b, err)
		}
		out := AppendJSON(nil, typ, b)
		if !jsontext.Value(out).IsValid() {
			t.Fatalf("%s %s: output %q is not JSON", typ, input, out)
		}
		var back any
		if err := decode(string(out), &back); err != nil {
			t.Fatalf("%s: decoding output %q: %v", typ, out, err)
		}
		again, err := Encode(typ, back)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%s %s: round trip %q -> %s -> %q, %v", typ, input, b, out, again, err)
		}
		var js any
		if err := json.Unmarshal(out, &js); err != nil {
			t.Fatalf("%s: JSON.parse of output %q: %v", typ, out, err)
		}
		sent := stringify(js)
		again, err = Encode(typ, sent)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("%s %s: through JavaScript %q -> %s -> %#v -> %q, %v", typ, input, b, out, sent, again, err)
		}
	}
}

// stringify is what the gateway decodes from JSON.stringify of a value
// that JSON.parse read: every number the shortest form of its float64.
func stringify(v any) any {
	switch v := v.(type) {
	case float64:
		return json.Number(appendFloat(nil, v))
	case []any:
		for i := range v {
			v[i] = stringify(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = stringify(v[k])
		}
	}
	return v
}

// literal is v as GraphQL's parser gives it from a literal: integers as
// int64, other numbers as float64. ok is false if the literal would be
// refused before Encode (an integer beyond 64 bits, or a float64 that
// does not hold the number exactly).
func literal(v any) (any, bool) {
	switch v := v.(type) {
	case json.Number:
		if _, st := parseInt(string(v)); st != intSyntax {
			n, err := strconv.ParseInt(string(v), 10, 64)
			return n, err == nil
		}
		if CheckNumber(string(v)) != nil {
			return nil, false
		}
		f, err := strconv.ParseFloat(string(v), 64)
		return f, err == nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			var ok bool
			if out[i], ok = literal(e); !ok {
				return nil, false
			}
		}
		return out, true
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			var ok bool
			if out[k], ok = literal(e); !ok {
				return nil, false
			}
		}
		return out, true
	}
	return v, true
}

// CheckNumber agrees with exact arithmetic: the value of the text equals
// the value of the shortest form of its float64.
func FuzzCheckNumber(f *testing.F) {
	for _, s := range []string{"0.1", "1e2", "-0", "9007199254740993", "1e400", "1e-400", "0.1000000000000000000001", "5e-324", "1.7976931348623157e308", "01", "1e-99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		err := CheckNumber(text)
		if !json.Valid([]byte(text)) || strings.TrimSpace(text) != text || !strings.ContainsAny(text[:1], "-0123456789") {
			if err == nil {
				t.Fatalf("CheckNumber(%q) accepted a non-number", text)
			}
			return
		}
		exp := 0
		if i := strings.IndexAny(text, "eE"); i >= 0 {
			e, perr := strconv.Atoi(strings.TrimPrefix(text[i+1:], "+"))
			if perr != nil {
				return
			}
			exp = e
		}
		if len(text) > 400 || exp > 1000 || exp < -1000 {
			return // big.Rat would be slow; TestCheckNumberLinear covers these
		}
		want, ok := new(big.Rat).SetString(text)
		if !ok {
			t.Fatalf("big.Rat cannot read %q", text)
		}
		exact := false
		if x, perr := strconv.ParseFloat(text, 64); perr == nil {
			short, _ := new(big.Rat).SetString(strconv.FormatFloat(x, 'e', -1, 64))
			exact = short.Cmp(want) == 0
		}
		if exact != (err == nil) {
			t.Fatalf("CheckNumber(%q) = %v, want exact %v", text, err, exact)
		}
	})
}

// Check never passes bytes that AppendJSON would turn into invalid JSON.
// What Check passes, AppendJSON writes as valid JSON, and WrittenLen is
// the length of that JSON once HTML-escaped as a response is.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"1", "1.5", "true", "{}", "\xff", "NaN", "[1,", `"<a&b>"`, "x\u2028y\u2029\x00\x1f\"\\\n", "9007199254740993"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, typ := range allTypes {
			if Check(typ, b) != nil {
				continue
			}
			out := AppendJSON(nil, typ, b)
			if !json.Valid(out) {
				t.Fatalf("%s: Check passed %q but AppendJSON wrote %q", typ, b, out)
			}
			var escaped bytes.Buffer
			json.HTMLEscape(&escaped, out)
			if n := WrittenLen(typ, b); n != escaped.Len() {
				t.Fatalf("%s %q: WrittenLen %d, written %d (%q)", typ, b, n, escaped.Len(), escaped.Bytes())
			}
		}
	})
}
