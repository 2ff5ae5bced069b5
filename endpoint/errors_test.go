package endpoint

import (
	"strings"
	"testing"
)

// What gqlgen and gqlparser write quoting a request is bounded as the
// gateway's own messages are: each quoted string, and the unquoted value
// of an operation name or an enum, to its first 64 bytes; the rest of the
// message stands, and a short message is left as it is.
func TestForeignMessagesQuoteTheStartOfWhatWasSent(t *testing.T) {
	long := strings.Repeat("<", 1000)
	start := strings.Repeat("<", 64) + "…"
	for _, tc := range []struct{ msg, want string }{
		{`Cannot query field "listItem" on type "Query". Did you mean "listItems"?`, `Cannot query field "listItem" on type "Query". Did you mean "listItems"?`},
		{`Int cannot represent non-integer value: "` + long + `"`, `Int cannot represent non-integer value: "` + start + `"`},
		{`Unknown argument "` + long + `" on field "Query.listItems".`, `Unknown argument "` + start + `" on field "Query.listItems".`},
		{`String cannot represent a non string value: "a \"quoted\" ` + long + `"`, `String cannot represent a non string value: "a \"quoted\" ` + strings.Repeat("<", 53) + `…"`},
		{"operation " + long + " not found", `operation "` + start + `" not found`},
		{"operation Foo not found", `operation "Foo" not found`},
		{long + " is not a valid ValueType", `"` + start + `" is not a valid ValueType`},
		{`Expected value of type "Int", found "` + long, `Expected value of type "Int", found "` + strings.Repeat("<", 256-len(`Expected value of type "Int", found "`)) + "…"},
		{"Int cannot represent non-integer value: [" + strings.Repeat("1, ", 500) + "]", "Int cannot represent non-integer value: [" + strings.Repeat("1, ", 500)[:256-len("Int cannot represent non-integer value: [")] + "…"},
	} {
		if got := foreignMessage(tc.msg); got != tc.want {
			t.Errorf("foreignMessage(%.80q…)\n = %q\nwant %q", tc.msg, got, tc.want)
		}
	}
}
