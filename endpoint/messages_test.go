package endpoint

import (
	"encoding/json"
	"strings"
	"testing"
)

// A message's id is written as JSON once, as it came: not escaped for
// HTML, and whatever it holds still the same id to a client.
func TestEnvelope(t *testing.T) {
	for _, id := range []string{"1", "3fa85f64-5717-4562-b3fc-2c963f66afa6", `<a href="x">&amp;</a>`, "\x00\n\u2028é", strings.Repeat("<", maxIDBytes)} {
		e := newEnvelope(id)
		var m struct{ Type, ID string }
		if err := json.Unmarshal(append(e.next, "null}"...), &m); err != nil || m.Type != "next" || m.ID != id {
			t.Errorf("the next message of id %q: %s: %+v %v", id, e.next, m, err)
		}
		if string(e.quoted()) != string(e.next[len(`{"type":"next","id":`):len(e.next)-len(`,"payload":`)]) || strings.Contains(string(e.quoted()), `\u003c`) {
			t.Errorf("id %q quoted as %s", id, e.quoted())
		}
		if e.size() != len(e.next)+1 {
			t.Errorf("id %q: size %d, want %d", id, e.size(), len(e.next)+1)
		}
	}
}
