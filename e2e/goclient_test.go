package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The typed Go client of examples/goclient, built as its own program, runs
// against a gateway that requires a token and runs only the operations the
// client exports (genqlient's export_operations, enforced), as a
// recommendation service would: the first run creates the feature, records
// reads stamped by its clock and reads them back, keeps the unread
// candidates, counts the last day and reads two users' histories in one
// request; the second run finds the feature and sees what another client
// (an engineer's key, with documents:any) wrote in between. The service's
// key may not send an operation of its own; a wrong token fails the run
// with the gateway's 401.
func TestGoClientExample(t *testing.T) {
	const key, engineer = "recs-example-key", "engineer-key"
	sum, engSum := sha256.Sum256([]byte(key)), sha256.Sum256([]byte(engineer))
	manifest, err := filepath.Abs(filepath.Join("..", "examples", "goclient", "operations.json"))
	if err != nil {
		t.Fatal(err)
	}
	g := startGateway(t, "LISTGATE_API_KEYS=recs "+hex.EncodeToString(sum[:])+" lists:read,lists:write,features:admin;"+
		"engineer "+hex.EncodeToString(engSum[:])+" lists:read,lists:write,documents:any",
		"LISTGATE_TRUSTED_DOCUMENTS="+manifest, "LISTGATE_TRUSTED_DOCUMENTS_MODE=enforce")

	bin := filepath.Join(t.TempDir(), "goclient")
	build := exec.Command("go", "build", "-o", bin, "./examples/goclient")
	build.Dir = ".." // the repository root, above e2e/
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/goclient: %v\n%s", err, out)
	}
	example := func(token string, args ...string) (stdout, stderr string, err error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"LISTGATE_URL=" + g.base + "/graphql", "LISTGATE_TOKEN=" + token}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err = cmd.Run()
		return o.String(), e.String(), err
	}

	if out, stderr, err := example("not-the-key"); err == nil || !strings.Contains(stderr, "returned error 401") || !strings.Contains(stderr, "UNAUTHENTICATED") {
		t.Fatalf("with a wrong token the example did not fail with the gateway's 401: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr)
	}

	began := time.Now()
	out, stderr, err := example(key, "-user", "u1", "-reads", "story1,story2,story3", "-candidates", "story2,story4,story5", "-users", "u1,u2")
	ended := time.Now()
	if err != nil {
		t.Fatalf("first run: %v\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want := []string{
		"feature user#reading_history|: created, STRING, ttl 315360000s",
		"recorded 3 reads of u1 (0 already expired)",
		"newest reads of u1 (more: false):",
		"  story3 *", "  story2 *", "  story1 *",
		"not yet read by u1: story4 story5 (of story2 story4 story5)",
		"reads of u1 in the last 24h: 3",
		"histories of u1 u2:",
		"  u1: story3 story2 story1",
		"  u2: -",
	}
	matchLines(t, "first run", lines, want)

	// The reads were stamped by the example's clock, a second apart, the
	// last during the run; the gateway holds them at those times.
	var stamps []time.Time
	for _, l := range lines[3:6] {
		_, ts, _ := strings.Cut(strings.TrimSpace(l), " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		stamps = append(stamps, at)
	}
	if stamps[0].Before(began) || stamps[0].After(ended) || stamps[0].Sub(stamps[1]) != time.Second || stamps[1].Sub(stamps[2]) != time.Second {
		t.Errorf("the reads were stamped %v, want a second apart, the newest within the run (%v to %v)", stamps, began, ended)
	}
	var stored struct {
		ListItems struct {
			Items []struct {
				Value     string
				Timestamp time.Time
			}
		}
	}
	adHoc := `{ listItems(entityType: "user", entityId: "u1", feature: "reading_history") { items { value timestamp } } }`
	if r := (tenant{t, g.base, key, http.DefaultClient}).send(adHoc); r.errCode != "QUERY_NOT_IN_SAFELIST" {
		t.Errorf("an operation the client does not ship, from its key: %d %s", r.status, r.body)
	}
	data := requestAs(t, g.base, engineer, adHoc, nil)
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	if got := stored.ListItems.Items; len(got) != 3 || got[0].Value != "story3" || got[2].Value != "story1" ||
		!got[0].Timestamp.Equal(stamps[0]) || !got[1].Timestamp.Equal(stamps[1]) || !got[2].Timestamp.Equal(stamps[2]) {
		t.Errorf("the gateway holds %+v, want story3, story2, story1 at %v", got, stamps)
	}

	// Another client adds a read of u1's two days back and one of u2's.
	requestAs(t, g.base, engineer, `mutation($old: Time!) {
		a: addListItems(list: {entityType: "user", entityId: "u1", feature: "reading_history"}, items: [{value: "story0", timestamp: $old}]) { added }
		b: addListItems(list: {entityType: "user", entityId: "u2", feature: "reading_history"}, items: [{value: "story7"}]) { added }
	}`, map[string]any{"old": time.Now().Add(-48 * time.Hour).Format(time.RFC3339Nano)})

	out, stderr, err = example(key, "-user", "u1", "-reads", "story4", "-candidates", "story0,story5,story4,story9", "-users", "u1,u2,u3", "-limit", "3")
	if err != nil {
		t.Fatalf("second run: %v\n%s", err, stderr)
	}
	matchLines(t, "second run", strings.Split(strings.TrimSuffix(out, "\n"), "\n"), []string{
		"feature user#reading_history|: exists, STRING, ttl 315360000s",
		"recorded 1 reads of u1 (0 already expired)",
		"newest reads of u1 (more: true):",
		"  story4 *", "  story3 *", "  story2 *",
		"not yet read by u1: story5 story9 (of story0 story5 story4 story9)",
		"reads of u1 in the last 24h: 4",
		"histories of u1 u2 u3:",
		"  u1: story4 story3 story2",
		"  u2: story7",
		"  u3: -",
	})
}

// matchLines compares output lines with the wanted ones; a wanted line
// ending in " *" matches any line with that prefix and one word more.
func matchLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		if prefix, wild := strings.CutSuffix(want[i], " *"); wild {
			rest, found := strings.CutPrefix(got[i], prefix+" ")
			ok = found && rest != "" && !strings.Contains(rest, " ")
		} else {
			ok = got[i] == want[i]
		}
	}
	if !ok {
		t.Errorf("%s printed:\n%s\nwant:\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
