package values

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/listgate/listgate/store"
)

func TestEncode(t *testing.T) {
	for _, tc := range []struct {
		typ  store.ValueType
		in   any
		want string // stored bytes; "" with err
		out  string // JSON written back
		err  bool
	}{
		{store.String, "story123", "story123", `"story123"`, false},
		{store.String, "", "", `""`, false},
		{store.String, "a\"b\n<é>", "a\"b\n<é>", `"a\"b\n<é>"`, false},
		{store.String, int64(1), "", "", true},
		{store.String, nil, "", "", true},
		{store.Int, int64(42), "42", "42", false},
		{store.Int, json.Number("-7"), "-7", "-7", false},
		{store.Int, float64(3), "3", "3", false},
		{store.Int, json.Number("9223372036854775807"), "9223372036854775807", "9223372036854775807", false},
		{store.Int, json.Number("9223372036854775808"), "", "", true},
		{store.Int, json.Number("1.5"), "", "", true},
		{store.Int, float64(1.5), "", "", true},
		{store.Int, "42", "", "", true},
		{store.Float, float64(1.5), "1.5", "1.5", false},
		{store.Float, json.Number("1.50"), "1.5", "1.5", false},
		{store.Float, json.Number("1e21"), "1e+21", "1e+21", false},
		{store.Float, int64(2), "2", "2", false},
		{store.Float, json.Number("-0.0"), "0", "0", false},
		{store.Float, json.Number("1e400"), "", "", true},
		{store.Float, true, "", "", true},
		{store.Boolean, true, "true", "true", false},
		{store.Boolean, false, "false", "false", false},
		{store.Boolean, "true", "", "", true},
		{store.Bytes, "AAH/", "\x00\x01\xff", `"AAH/"`, false},
		{store.Bytes, "AAH", "", "", true},
		{store.Bytes, "AA-_", "", "", true},
		{store.JSON, map[string]any{"b": json.Number("1.0"), "a": []any{"x", nil, true}}, `{"a":["x",null,true],"b":1}`, `{"a":["x",null,true],"b":1}`, false},
		{store.JSON, "<&>", `"<&>"`, `"<&>"`, false},
		{store.JSON, json.Number("10"), "10", "10", false},
		{store.JSON, nil, "", "", true},
	} {
		got, err := Encode(tc.typ, tc.in)
		if tc.err {
			if !errors.Is(err, store.ErrInvalid) {
				t.Errorf("Encode(%s, %#v) = %q, %v; want ErrInvalid", tc.typ, tc.in, got, err)
			}
			continue
		}
		if err != nil || string(got) != tc.want {
			t.Errorf("Encode(%s, %#v) = %q, %v; want %q", tc.typ, tc.in, got, err, tc.want)
			continue
		}
		if err := Check(tc.typ, got); err != nil {
			t.Errorf("Check(%s, %q): %v", tc.typ, got, err)
		}
		if out := AppendJSON(nil, tc.typ, got); string(out) != tc.out {
			t.Errorf("AppendJSON(%s, %q) = %s, want %s", tc.typ, got, out, tc.out)
		}
	}
}

// Equal values give equal bytes however the client spelled them.
func TestEncodeIsCanonical(t *testing.T) {
	var a, b any
	if err := decode(`{"x": 1, "y": [1.0, "\u00e9"], "z": {"b": 2, "a": 1}}`, &a); err != nil {
		t.Fatal(err)
	}
	if err := decode(`{"z":{"a":1e0,"b":2.00},"y":[1,"é"],"x":1}`, &b); err != nil {
		t.Fatal(err)
	}
	ea, err1 := Encode(store.JSON, a)
	eb, err2 := Encode(store.JSON, b)
	if err1 != nil || err2 != nil || string(ea) != string(eb) {
		t.Fatalf("%s (%v) != %s (%v)", ea, err1, eb, err2)
	}
}

func decode(s string, v any) error {
	d := json.NewDecoder(stringsReader(s))
	d.UseNumber()
	return d.Decode(v)
}

func TestCheckRejectsMalformedStoredBytes(t *testing.T) {
	for _, tc := range []struct {
		typ store.ValueType
		b   string
	}{
		{store.String, "\xff"},
		{store.Int, "1.5"},
		{store.Int, "+1"},
		{store.Int, "007"},
		{store.Int, ""},
		{store.Float, "NaN"},
		{store.Float, "Inf"},
		{store.Float, ".5"},
		{store.Float, "0x1p3"},
		{store.Boolean, "yes"},
		{store.JSON, "{"},
		{store.JSON, ""},
	} {
		if Check(tc.typ, []byte(tc.b)) == nil {
			t.Errorf("Check(%s, %q) accepted", tc.typ, tc.b)
		}
	}
}
