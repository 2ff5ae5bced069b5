package values

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/listgate/listgate/errkind"
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
		{store.Int, int64(9007199254740991), "9007199254740991", "9007199254740991", false},
		{store.Int, int64(-9007199254740991), "-9007199254740991", "-9007199254740991", false},
		{store.Int, json.Number("-0"), "0", "0", false},
		{store.Int, "9223372036854775807", "9223372036854775807", `"9223372036854775807"`, false},
		{store.Int, json.Number("9223372036854775808"), "", "", true},
		{store.Int, json.Number("1.5"), "", "", true},
		{store.Int, float64(1.5), "", "", true},
		{store.Int, json.Number("1e2"), "", "", true},
		{store.Int, true, "", "", true},
		{store.Float, float64(1.5), "1.5", "1.5", false},
		{store.Float, json.Number("1.50"), "1.5", "1.5", false},
		{store.Float, json.Number("1e21"), "1e+21", "1e+21", false},
		{store.Float, int64(2), "2", "2", false},
		{store.Float, int64(1 << 53), "9007199254740992", "9007199254740992", false},
		{store.Float, json.Number("0.30000000000000004"), "0.30000000000000004", "0.30000000000000004", false},
		{store.Float, json.Number("5e-324"), "5e-324", "5e-324", false},
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
		{store.JSON, map[string]any{"big": "9007199254740993", "n": json.Number("1e2"), "i": int64(1 << 53)}, `{"big":"9007199254740993","i":9007199254740992,"n":100}`, `{"big":"9007199254740993","i":9007199254740992,"n":100}`, false},
		{store.JSON, nil, "", "", true},
	} {
		if !tc.err {
			testAcceptances(t, []acceptance{{tc.typ, tc.in, tc.want, tc.out}})
			continue
		}
		if got, err := Encode(tc.typ, tc.in); !errors.Is(err, errkind.Invalid) {
			t.Errorf("Encode(%s, %#v) = %q, %v; want errkind.Invalid", tc.typ, tc.in, got, err)
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

// refusal is a value Encode must refuse, with an error naming what to do
// instead.
type refusal struct {
	typ  store.ValueType
	in   any
	says string // a part of the error message
}

func testRefusals(t *testing.T, cases []refusal) {
	t.Helper()
	for _, tc := range cases {
		got, err := Encode(tc.typ, tc.in)
		if !errors.Is(err, errkind.Invalid) {
			t.Errorf("Encode(%s, %#v) = %q, %v; want errkind.Invalid", tc.typ, tc.in, got, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.says) {
			t.Errorf("Encode(%s, %#v): error %q does not say %q", tc.typ, tc.in, err, tc.says)
		}
	}
}

// acceptance is a value Encode must store as want and write back as out.
type acceptance struct {
	typ       store.ValueType
	in        any
	want, out string
}

func testAcceptances(t *testing.T, cases []acceptance) {
	t.Helper()
	for _, tc := range cases {
		got, err := Encode(tc.typ, tc.in)
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

// INT travels as a number within ±(2^53−1) and as a string beyond.
func TestEncodeIntBeyondSafeTravelsAsString(t *testing.T) {
	testAcceptances(t, []acceptance{
		{store.Int, "9007199254740993", "9007199254740993", `"9007199254740993"`},
		{store.Int, "9007199254740992", "9007199254740992", `"9007199254740992"`},
		{store.Int, "-9007199254740992", "-9007199254740992", `"-9007199254740992"`},
		{store.Int, "9223372036854775807", "9223372036854775807", `"9223372036854775807"`},
		{store.Int, "-9223372036854775808", "-9223372036854775808", `"-9223372036854775808"`},
		// Within the safe range a string is fine too, and reads back as a
		// number, as the same stored bytes as the number.
		{store.Int, "42", "42", "42"},
		{store.Int, "-9007199254740991", "-9007199254740991", "-9007199254740991"},
		{store.Int, "0", "0", "0"},
	})
}

func TestEncodeIntRefusals(t *testing.T) {
	const asString = `integers beyond ±9007199254740991 must be sent as strings, e.g. "9007199254740993"`
	testRefusals(t, []refusal{
		// Numbers a JavaScript client would read as another number.
		{store.Int, int64(9007199254740993), asString},
		{store.Int, json.Number("9007199254740993"), asString},
		{store.Int, int64(-9007199254740992), `must be sent as strings, e.g. "-9007199254740992"`},
		{store.Int, json.Number("9223372036854775807"), `must be sent as strings, e.g. "9223372036854775807"`},
		{store.Int, int64(math.MinInt64), `must be sent as strings, e.g. "-9223372036854775808"`},
		// A fraction or exponent, as a literal (float64) or a variable.
		{store.Int, float64(100), "without a fraction or exponent (e.g. 100, not 1e2 or 100.0)"},
		{store.Int, float64(3), "without a fraction or exponent"},
		{store.Int, float64(1 << 62), "without a fraction or exponent"},
		// Strings: canonical int64 digits only.
		{store.Int, "9223372036854775808", "to 9223372036854775807 (beyond ±9007199254740991 sent as strings"},
		{store.Int, "-9223372036854775809", "to 9223372036854775807 (beyond ±9007199254740991 sent as strings"},
		{store.Int, "007", "canonical decimal digits"},
		{store.Int, "+1", "canonical decimal digits"},
		{store.Int, "-0", "canonical decimal digits"},
		{store.Int, " 1", "canonical decimal digits"},
		{store.Int, "1.0", "canonical decimal digits"},
		{store.Int, "1e2", "canonical decimal digits"},
		{store.Int, "", "canonical decimal digits"},
		{store.Int, "-", "canonical decimal digits"},
		{store.Int, "١٢", "canonical decimal digits"},
	})
}

// The same number is refused whether it came as a literal or a variable.
func TestEncodeIntExponentRefusedEitherWay(t *testing.T) {
	for _, in := range []any{float64(100), json.Number("1e2"), json.Number("100.0"), json.Number("1E+2")} {
		if b, err := Encode(store.Int, in); !errors.Is(err, errkind.Invalid) {
			t.Errorf("Encode(INT, %#v) = %q, %v; want errkind.Invalid", in, b, err)
		}
	}
}

func TestAppendJSONIntQuotesBeyondSafe(t *testing.T) {
	for _, tc := range []struct{ stored, out string }{
		{"9007199254740991", "9007199254740991"},
		{"-9007199254740991", "-9007199254740991"},
		{"9007199254740992", `"9007199254740992"`},
		{"-9007199254740992", `"-9007199254740992"`},
		{"9999999999999999", `"9999999999999999"`},
		{"10000000000000000", `"10000000000000000"`},
		{"9223372036854775807", `"9223372036854775807"`},
		{"-9223372036854775808", `"-9223372036854775808"`},
		{"1000000000000000", "1000000000000000"},
	} {
		if err := Check(store.Int, []byte(tc.stored)); err != nil {
			t.Errorf("Check(INT, %s): %v", tc.stored, err)
		}
		if out := AppendJSON(nil, store.Int, []byte(tc.stored)); string(out) != tc.out {
			t.Errorf("AppendJSON(INT, %s) = %s, want %s", tc.stored, out, tc.out)
		}
	}
}

func TestCheckNumber(t *testing.T) {
	for _, tc := range []struct {
		text string
		ok   bool
	}{
		{"0.1", true},
		{"1.0", true},
		{"100", true},
		{"1e2", true},
		{"1E+2", true},
		{"10000e-2", true},
		{"0.000001e6", true},
		{"-0", true},
		{"-0.0", true},
		{"0e99999999999999999999", true},
		{"0.0e-99999999999999999999", true},
		{"9007199254740992", true},
		{"-9007199254740991", true},
		{"18014398509481984", true},
		{"0.30000000000000004", true},
		{"1.7976931348623157e308", true},
		{"-1.7976931348623157e+308", true},
		{"5e-324", true},
		{"2.2250738585072014e-308", true},
		{"123456789012345680000", true},
		{"1e21", true},

		{"9007199254740993", false},
		{"1152921504606846976", false}, // 2^60: held, but JavaScript writes 1152921504606847000
		{"0.1000000000000000000001", false},
		{"0.30000000000000003", false},
		{"0.10000000000000001", false}, // reads as 0.1, whose shortest form is shorter
		{"1e400", false},
		{"-1e400", false},
		{"1.7976931348623159e308", false},
		{"1e-400", false},
		{"2e-324", false},
		{"3e-324", false},
		{"1e-99999999999999999999", false},
		{"1e99999999999999999999", false},
		{"123456789012345678", false},

		{"", false},
		{"-", false},
		{"01", false},
		{"+1", false},
		{".5", false},
		{"1.", false},
		{"1e", false},
		{"1e+", false},
		{"NaN", false},
		{"Infinity", false},
		{"0x10", false},
		{" 1", false},
		{"1 ", false},
	} {
		err := CheckNumber(tc.text)
		if tc.ok != (err == nil) {
			t.Errorf("CheckNumber(%q) = %v, want ok %v", tc.text, err, tc.ok)
		}
		if err != nil && !errors.Is(err, errkind.Invalid) {
			t.Errorf("CheckNumber(%q) = %v, want errkind.Invalid", tc.text, err)
		}
	}
	const want = "invalid number 9007199254740993 cannot be held exactly by a 64-bit float (what JavaScript clients use); send it as a string"
	if err := CheckNumber("9007199254740993"); err == nil || err.Error() != want {
		t.Errorf("CheckNumber(9007199254740993) = %v, want %q", err, want)
	}
}

// Huge exponents and long digit strings cost time linear in their length.
func TestCheckNumberLinear(t *testing.T) {
	n := 1 << 20
	for _, tc := range []struct {
		text string
		ok   bool
	}{
		{"1e-" + strings.Repeat("9", n), false},
		{"1e" + strings.Repeat("9", n), false},
		{"0." + strings.Repeat("0", n) + "1", false},
		{"1." + strings.Repeat("0", n) + "1", false},
		{strings.Repeat("7", n), false},
		// Padding zeros do not change the value, 1.
		{"1" + strings.Repeat("0", n) + "e-" + strconv.Itoa(n), true},
		{"0." + strings.Repeat("0", n) + "1e" + strconv.Itoa(n+1), true},
		{"1." + strings.Repeat("0", n), true},
	} {
		start := time.Now()
		err := CheckNumber(tc.text)
		if d := time.Since(start); d > time.Second {
			t.Errorf("CheckNumber(%.20s…) took %v", tc.text, d)
		}
		if tc.ok != (err == nil) {
			t.Errorf("CheckNumber(%.20s…) = %v, want ok %v", tc.text, err, tc.ok)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("CheckNumber(%.20s…): error of %d bytes", tc.text, len(err.Error()))
		}
	}
}

func TestEncodeFloatRefusesInexact(t *testing.T) {
	testRefusals(t, []refusal{
		{store.Float, json.Number("9007199254740993"), "the nearest it holds is 9007199254740992"},
		{store.Float, json.Number("0.1000000000000000000001"), "the nearest it holds is 0.1"},
		{store.Float, json.Number("1e-400"), "below 5e-324"},
		{store.Float, json.Number("0.30000000000000003"), "cannot hold 0.30000000000000003 exactly"},
		{store.Float, json.Number("1152921504606846976"), "the nearest it holds is 1152921504606847000"},
		{store.Float, int64(9007199254740993), "the nearest it holds is 9007199254740992"},
		{store.Float, int64(1 << 60), "the nearest it holds is 1152921504606847000"},
		{store.Float, int64(math.MaxInt64), "cannot hold 9223372036854775807 exactly"},
	})
}

func TestEncodeJSONRefusesChangedValues(t *testing.T) {
	const asString = "cannot be held exactly by a 64-bit float (what JavaScript clients use); send it as a string"
	testRefusals(t, []refusal{
		{store.JSON, map[string]any{"id": json.Number("9007199254740993")}, "number 9007199254740993 " + asString + " at /id"},
		{store.JSON, map[string]any{"n": json.Number("1e400")}, "number 1e400 " + asString + " at /n"},
		{store.JSON, map[string]any{"n": json.Number("1e-400")}, asString},
		{store.JSON, map[string]any{"id": int64(9007199254740993)}, "number 9007199254740993 " + asString},
		{store.JSON, []any{json.Number("1"), map[string]any{"a/b~": []any{json.Number("0.1000000000000000000001")}}}, asString + " at /1/a~1b~0/0"},
		{store.JSON, json.Number("9007199254740993"), asString},
		{store.JSON, int64(1 << 60), asString},
		// Strings and keys: refused, not replaced with U+FFFD.
		{store.JSON, "\xff", "is not valid UTF-8"},
		{store.JSON, map[string]any{"k": "a\xed\xa0\x80"}, `string "a\xed\xa0\x80" is not valid UTF-8 (invalid bytes or a lone surrogate); send binary data as base64 at /k`},
		{store.JSON, map[string]any{"\xed\xb0\x80": true}, `object key "\xed\xb0\x80" is not valid UTF-8`},
		{store.JSON, []any{[]any{"ok", "\xc3"}}, "at /0/1"},
		// Not JSON values at all (json.Marshal would write something).
		{store.JSON, struct{ A int }{1}, "is not a JSON value"},
		{store.JSON, map[string]any{"f": uint64(1)}, "is not a JSON value"},
	})
}

func TestEncodeStringRefusesInvalidUTF8(t *testing.T) {
	const says = "must be valid UTF-8 (no invalid bytes or lone surrogates); send binary data to a BYTES feature as base64"
	testRefusals(t, []refusal{
		{store.String, "\xff", says},
		{store.String, "story\x80", says},
		{store.String, "\xed\xa0\x80", says}, // U+D800 as WTF-8
		{store.String, "\xed\xbf\xbf", says}, // U+DFFF
		{store.String, "caf\xc3", says},      // cut in the middle of é
		{store.String, "\xc0\xaf", says},     // overlong /
	})
}

// A literal (int64, float64) and a variable (json.Number) of the same
// value give the same bytes or are both refused.
func TestEncodeLiteralAndVariableAgree(t *testing.T) {
	for _, tc := range []struct {
		typ store.ValueType
		lit any
		num json.Number
	}{
		{store.Int, float64(100), "1e2"},
		{store.Int, float64(100), "100.0"},
		{store.Int, float64(3), "3.0"},
		{store.Int, float64(-5), "-5e0"},
	} {
		a, errA := Encode(tc.typ, tc.lit)
		b, errB := Encode(tc.typ, tc.num)
		if (errA == nil) != (errB == nil) || string(a) != string(b) {
			t.Errorf("%s: literal %#v -> %q, %v; variable %#v -> %q, %v", tc.typ, tc.lit, a, errA, tc.num, b, errB)
		}
	}
}

// Short STRING and INT values allocate only their bytes; CheckNumber and
// AppendJSON allocate nothing.
func TestAllocs(t *testing.T) {
	for _, tc := range []struct {
		typ store.ValueType
		in  any
	}{
		{store.String, "story000123456"},
		{store.Int, json.Number("1234567890")},
		{store.Int, int64(1234567890)},
		{store.Int, "9007199254740993"},
		{store.Float, json.Number("3.25")},
	} {
		if n := testing.AllocsPerRun(100, func() { Encode(tc.typ, tc.in) }); n > 1 {
			t.Errorf("Encode(%s, %#v): %v allocations", tc.typ, tc.in, n)
		}
	}
	if n := testing.AllocsPerRun(100, func() { CheckNumber("0.30000000000000004") }); n != 0 {
		t.Errorf("CheckNumber: %v allocations", n)
	}
	buf := make([]byte, 0, 64)
	stored := []byte("9007199254740993")
	if n := testing.AllocsPerRun(100, func() { AppendJSON(buf[:0], store.Int, stored) }); n != 0 {
		t.Errorf("AppendJSON(INT): %v allocations", n)
	}
}

// appendFloat writes what RFC 8785 canonicalisation (jsontext) writes.
func TestAppendFloatIsECMAScript(t *testing.T) {
	for _, f := range []float64{1, -1, 0.1, 1.5, 100, 1e20, 1e21, 1.5e21, 123456789012345680000, 1e-6, 1.5e-6, 1e-7, 1.2345e-7,
		5e-324, math.MaxFloat64, -math.MaxFloat64, 1 << 53, 0.30000000000000004, 123.456, 1e100, -2.5e-300} {
		checkAppendFloat(t, f)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		if f := math.Float64frombits(r.Uint64()); !math.IsNaN(f) && !math.IsInf(f, 0) {
			checkAppendFloat(t, f)
		}
		checkAppendFloat(t, float64(r.Int64N(1<<54)-1<<53)/float64(r.Int64N(1e6)+1))
	}
}

func checkAppendFloat(t *testing.T, f float64) {
	t.Helper()
	want := jsontext.Value(strconv.FormatFloat(f, 'g', -1, 64))
	if err := want.Canonicalize(); err != nil {
		t.Fatalf("%v: %v", f, err)
	}
	if f == 0 {
		want = jsontext.Value("0")
	}
	if got := appendFloat(nil, f); string(got) != string(want) {
		t.Errorf("appendFloat(%v) = %s, want %s", f, got, want)
	}
}

func FuzzAppendFloat(f *testing.F) {
	for _, x := range []float64{1, 0.1, 1e21, 1e-7, 5e-324} {
		f.Add(math.Float64bits(x))
	}
	f.Fuzz(func(t *testing.T, bits uint64) {
		x := math.Float64frombits(bits)
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return
		}
		checkAppendFloat(t, x)
	})
}

// JSON values nest at most MaxJSONDepth levels: deeper ones are refused at
// add, and a deeper one found stored fails Check (its list's field fails;
// the response still encodes).
func TestJSONDepth(t *testing.T) {
	nested := func(depth int) any {
		var v any = "leaf"
		for range depth {
			v = []any{v}
		}
		return v
	}
	for _, depth := range []int{MaxJSONDepth + 1, 100000} {
		if _, err := Encode(store.JSON, nested(depth)); !errors.Is(err, errkind.Invalid) || !strings.Contains(err.Error(), "deeper than 64 levels") {
			t.Errorf("depth %d: %v", depth, err)
		}
		stored := strings.Repeat("[", depth) + `"leaf"` + strings.Repeat("]", depth)
		if err := Check(store.JSON, []byte(stored)); err == nil {
			t.Errorf("Check accepted a stored value %d deep", depth)
		}
	}
	b, err := Encode(store.JSON, nested(MaxJSONDepth))
	if err != nil {
		t.Fatalf("depth %d: %v", MaxJSONDepth, err)
	}
	if err := Check(store.JSON, b); err != nil {
		t.Fatalf("Check of what Encode wrote: %v", err)
	}
	// Empty innermost containers count as a level too: what Encode accepts,
	// Check accepts, and what Check refuses, Encode refuses.
	empty := func(depth int, inner any) any {
		v := inner
		for range depth - 1 {
			v = []any{v}
		}
		return v
	}
	for _, inner := range []any{[]any{}, map[string]any{}} {
		if _, err := Encode(store.JSON, empty(MaxJSONDepth+1, inner)); err == nil {
			t.Errorf("Encode accepted %d levels ending in %v", MaxJSONDepth+1, inner)
		}
		b, err := Encode(store.JSON, empty(MaxJSONDepth, inner))
		if err != nil {
			t.Fatalf("%d levels ending in %v: %v", MaxJSONDepth, inner, err)
		}
		if err := Check(store.JSON, b); err != nil {
			t.Errorf("Check of %d levels ending in %v: %v", MaxJSONDepth, inner, err)
		}
	}
	if err := Check(store.JSON, []byte(`{"a":"[[[[\"]{\\"}`)); err != nil {
		t.Fatalf("brackets inside strings count as nesting: %v", err)
	}
}
