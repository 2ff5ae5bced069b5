package values

import (
	"encoding/json"
	"testing"

	"github.com/listgate/listgate/store"
)

func BenchmarkEncode(b *testing.B) {
	for _, tc := range []struct {
		typ store.ValueType
		in  any
	}{
		{store.String, "story000123456"},
		{store.Int, json.Number("1234567890")},
		{store.Float, json.Number("3.25")},
		{store.JSON, map[string]any{"id": "story1", "score": json.Number("0.75"), "tags": []any{"a", "b"}}},
		{store.Int, "9007199254740993"},
	} {
		b.Run(string(tc.typ)+suffix(tc.in), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Encode(tc.typ, tc.in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Check and AppendJSON run for every item a read returns.
func BenchmarkCheckAndAppendJSON(b *testing.B) {
	for _, tc := range []struct {
		typ store.ValueType
		in  string
	}{
		{store.String, "story000123456"},
		{store.Int, "1234567890"},
		{store.JSON, `{"id":"story1","score":0.75,"tags":["a","b"]}`},
		{store.Int, "9007199254740993"},
	} {
		b.Run(string(tc.typ)+suffix(tc.in), func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 128)
			for b.Loop() {
				if err := Check(tc.typ, []byte(tc.in)); err != nil {
					b.Fatal(err)
				}
				buf = AppendJSON(buf[:0], tc.typ, []byte(tc.in))
			}
		})
	}
}

// suffix names the benchmarks of INT values beyond ±MaxSafeInteger.
func suffix(in any) string {
	if s, ok := in.(string); ok && len(s) > 15 && s[0] == '9' {
		return "/beyondSafe"
	}
	return ""
}

func BenchmarkCheckNumber(b *testing.B) {
	for _, text := range []string{"0.75", "0.30000000000000004", "9007199254740993", "1e-400"} {
		b.Run(text, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				CheckNumber(text)
			}
		})
	}
}
