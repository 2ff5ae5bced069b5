package errkind

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// An error shows at most MaxQuoted bytes of what was sent, cut where a
// character starts, and says when it cut.
func TestClip(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{strings.Repeat("a", MaxQuoted), strings.Repeat("a", MaxQuoted)},
		{strings.Repeat("a", MaxQuoted+1), strings.Repeat("a", MaxQuoted) + "…"},
		{strings.Repeat("a", MaxQuoted-1) + "é", strings.Repeat("a", MaxQuoted-1) + "…"},
		{strings.Repeat("a", MaxQuoted-2) + "✓✓", strings.Repeat("a", MaxQuoted-2) + "…"},
		{strings.Repeat("\x80", 100), strings.Repeat("\x80", MaxQuoted-utf8.UTFMax) + "…"}, // not UTF-8: cut all the same
	} {
		if got := Clip(tc.in); got != tc.want {
			t.Errorf("Clip(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got, want := Quote(strings.Repeat(`"`, 100)), `"`+strings.Repeat(`\"`, MaxQuoted)+`…"`; got != want {
		t.Errorf("Quote = %s, want %s", got, want)
	}
}
