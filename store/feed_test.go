package store

import (
	"errors"
	"strings"
	"testing"

	"github.com/listgate/listgate/errkind"
)

// A position of a kind of store, of that kind's length, is read back as
// it was written; anything else is malformed (errkind.Invalid, a client's
// BAD_USER_INPUT), not a position of another feed: text that happens to
// decode, a kind of store that does not exist, or a record of the wrong
// length for its kind.
func TestParsePosition(t *testing.T) {
	for _, p := range []Position{
		{Record: "c" + strings.Repeat("\x01", CQLRecordLen-1), Item: 3},
		{Record: "e" + strings.Repeat("\xff", EmbeddedRecordLen-1), Item: AllItems},
		{Record: "e" + strings.Repeat("\x00", EmbeddedRecordLen-1), Item: 0},
	} {
		back, err := ParsePosition(p.String())
		if err != nil || back != p {
			t.Errorf("ParsePosition(%q) = %v, %v; want %v", p.String(), back, err, p)
		}
	}
	for _, text := range []string{
		"not-a-position", // decodes, as 10 bytes
		"", "!!", "AAAA", strings.Repeat("A", 100),
		Position{Record: "z" + strings.Repeat("\x01", EmbeddedRecordLen-1)}.String(),
		Position{Record: "e" + strings.Repeat("\x01", CQLRecordLen-1)}.String(),
		Position{Record: "c" + strings.Repeat("\x01", EmbeddedRecordLen-1)}.String(),
		Position{Record: "e" + strings.Repeat("\x01", EmbeddedRecordLen)}.String(),
		Position{Record: "e"}.String(),
	} {
		if p, err := ParsePosition(text); !errors.Is(err, errkind.Invalid) {
			t.Errorf("ParsePosition(%q) = %v, %v; want errkind.Invalid", text, p, err)
		}
	}
}
