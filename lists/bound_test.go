package lists

import (
	"bytes"
	"testing"
	"unicode/utf8"

	"github.com/99designs/gqlgen/graphql"
)

// quotedLen is exactly what a response writes of a String: gqlgen's
// MarshalString, then <, >, &, U+2028 and U+2029 escaped as the endpoint's
// writeResponse escapes them.
func FuzzQuotedLen(f *testing.F) {
	for _, s := range []string{"", "user", `say "hi" \ there`, "tab\tcr\rnl\n", "\x00\x01\b\f\x1f", "<b>&amp;</b>", "line\u2028para\u2029", "é, 😀", "\xe2\x80", "\xff\xfe"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return // gqlgen writes invalid UTF-8 as U+FFFD; a feature's strings are checked UTF-8
		}
		var b bytes.Buffer
		graphql.MarshalString(s).MarshalGQL(&b)
		want := b.Len() + 5*(bytes.Count(b.Bytes(), []byte("<"))+bytes.Count(b.Bytes(), []byte(">"))+bytes.Count(b.Bytes(), []byte("&"))) +
			3*(bytes.Count(b.Bytes(), []byte("\u2028"))+bytes.Count(b.Bytes(), []byte("\u2029")))
		if got := quotedLen(s); got != want {
			t.Fatalf("quotedLen(%q) = %d, want %d (%s)", s, got, want, b.Bytes())
		}
	})
}
