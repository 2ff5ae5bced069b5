package values

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/listgate/listgate/store"
)

func stringsReader(s string) *strings.Reader { return strings.NewReader(s) }

var allTypes = []store.ValueType{store.String, store.Int, store.Float, store.Boolean, store.Bytes, store.JSON}

// Any JSON input either encodes, with bytes that pass Check, re-encode to
// themselves, and print as valid JSON, or is rejected; nothing panics.
func FuzzEncode(f *testing.F) {
	for _, s := range []string{`"story1"`, `42`, `-0.0`, `1e21`, `true`, `"AAH/"`, `{"b":1,"a":[null]}`, `null`, `"\ud800"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		var v any
		if decode(input, &v) != nil {
			return
		}
		for _, typ := range allTypes {
			b, err := Encode(typ, v)
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
		}
	})
}

// Check never passes bytes that AppendJSON would turn into invalid JSON.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"1", "1.5", "true", "{}", "\xff", "NaN", "[1,"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, typ := range allTypes {
			if Check(typ, b) != nil {
				continue
			}
			if out := AppendJSON(nil, typ, b); !json.Valid(out) {
				t.Fatalf("%s: Check passed %q but AppendJSON wrote %q", typ, b, out)
			}
		}
	})
}
