package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/dataio"
	"github.com/listgate/listgate/store"
)

// loadItem is an item of the input of a load.
type loadItem struct {
	EntityID  string
	Timestamp string
	Value     string
}

// TestLoadKilledAndResumed runs listgate load as a process, through a
// gateway (with an API key) and straight into the embedded store, kills it
// once 60% of the items are written, runs it again, and reads every list
// back through a gateway: exactly the rows of the input. A bad row at the
// end is reported with its line.
func TestLoadKilledAndResumed(t *testing.T) {
	const key = "load-test-key"
	sum := sha256.Sum256([]byte(key))
	keys := "LISTGATE_API_KEYS=loader " + hex.EncodeToString(sum[:]) + " lists:read,lists:write,features:admin"
	for _, via := range []string{"gateway", "data-dir"} {
		t.Run(via, func(t *testing.T) {
			bin := builtBinary(t)
			dir := t.TempDir()
			g := startGateway(t, keys, "LISTGATE_DATA_DIR="+dir)
			post := func(query string, vars map[string]any) json.RawMessage {
				t.Helper()
				body, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
				req, _ := http.NewRequest(http.MethodPost, g.base+"/graphql", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := g.client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var out struct {
					Data   json.RawMessage
					Errors []any
				}
				b, _ := io.ReadAll(resp.Body)
				if err := json.Unmarshal(b, &out); err != nil || len(out.Errors) > 0 {
					t.Fatalf("%s: %s", query, b)
				}
				return out.Data
			}
			post(`mutation { createListFeature(input: {entityType: "user", name: "reading_history", valueType: STRING, ttlSeconds: 2592000}) { key } }`, nil)

			const n, lists = 60_000, 50
			path := filepath.Join(t.TempDir(), "history.ndjson")
			var want []loadItem
			var buf bytes.Buffer
			w, _ := dataio.NewWriter(dataio.NDJSON, &buf)
			now := time.Now()
			for i := range n {
				ts := now.Add(-time.Duration(rand.IntN(3600e6)) * time.Microsecond).UnixNano()
				it := loadItem{fmt.Sprintf("u%d", i%lists), "", fmt.Sprintf("story %d", i)}
				w.Write(dataio.Row{EntityType: "user", EntityID: it.EntityID, Feature: "reading_history",
					Value: dataio.StoredValue(store.String, []byte(it.Value)), Timestamp: ts, HasTimestamp: true})
				it.Timestamp = time.Unix(0, ts).UTC().Format(time.RFC3339Nano)
				want = append(want, it)
			}
			w.Close()
			buf.WriteString(`{"entityType":"user","entityId":"u1","feature":"reading_history","value":7,"timestamp":"2024-08-29T16:44:05.43Z"}` + "\n")
			if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}

			args := []string{"load", "--url", g.base, "--api-key", key}
			if via == "data-dir" {
				// The gateway holds the folder's lock: the load is refused
				// while it serves, and runs once it has stopped.
				_, errOut, code := runCommand(t, bin, nil, "load", "--data-dir", dir, path)
				if code != 1 || !strings.Contains(errOut, "--url") {
					t.Errorf("a load into a folder a gateway serves: exit %d, %s", code, errOut)
				}
				if _, err := g.Terminate(30 * time.Second); err != nil {
					t.Fatal(err)
				}
				args = []string{"load", "--data-dir", dir}
			}
			args = append(args, "--concurrency", "2", "--batch-items", "200", "--max-add-items", "200", "--progress", "json", "--progress-interval", "50ms", path)

			// The first run, killed once 60% of the items are written.
			cmd := exec.Command(bin, args...)
			cmd.Env = cleanEnv()
			stderr, _ := cmd.StderrPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			killed := false
			lines := bufio.NewScanner(stderr)
			for lines.Scan() {
				var p struct{ Items int64 }
				if json.Unmarshal(lines.Bytes(), &p) == nil && p.Items >= n*6/10 {
					if _, err := os.Stat(path + ".checkpoint"); err == nil {
						cmd.Process.Kill()
						killed = true
						break
					}
				}
			}
			go io.Copy(io.Discard, stderr)
			cmd.Wait()
			if !killed {
				t.Fatal("the load ended before it was 60% through")
			}

			// The second run goes on from the checkpoint.
			out, errOut, code := runCommand(t, bin, nil, args...)
			if code != 1 || !strings.Contains(errOut, "1 bad rows were written nowhere") {
				t.Errorf("the second run, with its bad row: exit %d\n%s%s", code, out, errOut)
			}
			if !strings.Contains(errOut, fmt.Sprintf(`"file":%q,"line":%d,"error":"`, path, n+1)) || !strings.Contains(errOut, "STRING values") {
				t.Errorf("the bad row is not reported with its line:\n%s", errOut)
			}
			if !strings.Contains(out, "1 bad rows") || strings.Contains(out, " 0 rows skipped") {
				t.Errorf("the second run: %s", out)
			}

			if via == "data-dir" {
				g = startGateway(t, keys, "LISTGATE_DATA_DIR="+dir)
			}
			var got []loadItem
			for l := range lists {
				after := ""
				for {
					data := post(`query($id: ID!, $after: String) { listItems(entityType: "user", entityId: $id, feature: "reading_history", limit: 1000, after: $after) { items { value timestamp } hasMore endCursor } }`,
						map[string]any{"id": fmt.Sprintf("u%d", l), "after": after})
					var page struct {
						ListItems struct {
							Items []struct {
								Value     string
								Timestamp string
							}
							HasMore   bool
							EndCursor string
						}
					}
					json.Unmarshal(data, &page)
					for _, it := range page.ListItems.Items {
						got = append(got, loadItem{fmt.Sprintf("u%d", l), it.Timestamp, it.Value})
					}
					if !page.ListItems.HasMore {
						break
					}
					after = page.ListItems.EndCursor
				}
			}
			cmp := func(a, b loadItem) int { return strings.Compare(a.EntityID+a.Value, b.EntityID+b.Value) }
			slices.SortFunc(got, cmp)
			slices.SortFunc(want, cmp)
			if len(got) != len(want) {
				t.Fatalf("the lists hold %d items, the input %d", len(got), len(want))
			}
			for i := range got {
				gt, _ := time.Parse(time.RFC3339Nano, got[i].Timestamp)
				wt, _ := time.Parse(time.RFC3339Nano, want[i].Timestamp)
				if got[i].Value != want[i].Value || !gt.Equal(wt) {
					t.Fatalf("item %d: %+v, want %+v", i, got[i], want[i])
				}
			}
		})
	}
}

// TestLoadThrottled: through a gateway whose caller budget lets through
// 3,000 points a second, a load of 20,000 items is throttled (429 with
// Retry-After) again and again, waits as told, and ends with every item.
func TestLoadThrottled(t *testing.T) {
	const key = "throttled-key"
	sum := sha256.Sum256([]byte(key))
	dir := t.TempDir()
	g := startGateway(t, "LISTGATE_DATA_DIR="+dir, "LISTGATE_MAX_COMPLEXITY=5000",
		"LISTGATE_API_KEYS=loader "+hex.EncodeToString(sum[:])+" lists:read,lists:write,features:admin cost=3000/5000")
	req := func(query string) string {
		body, _ := json.Marshal(map[string]any{"query": query})
		r, _ := http.NewRequest(http.MethodPost, g.base+"/graphql", bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+key)
		resp, err := g.client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if out := req(`mutation { createListFeature(input: {entityType: "user", name: "clicks", valueType: INT, ttlSeconds: 86400}) { key } }`); !strings.Contains(out, `"key"`) {
		t.Fatal(out)
	}
	const n = 20_000
	var rows strings.Builder
	rows.WriteString("entityType,entityId,feature,value,timestamp\n")
	now := time.Now()
	for i := range n {
		fmt.Fprintf(&rows, "user,u%d,clicks,%d,%s\n", i%10, i, now.Add(-time.Duration(i)*time.Millisecond).UTC().Format(time.RFC3339Nano))
	}
	path := filepath.Join(t.TempDir(), "clicks.csv")
	os.WriteFile(path, []byte(rows.String()), 0o600)
	began := time.Now()
	out, errOut, code := runCommand(t, builtBinary(t), nil, "load", "--url", g.base, "--api-key", key, "--progress", "none", path)
	took := time.Since(began)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d rows written, 0 bad rows", n)) {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	// 20,000 items cost more than 20,000 points: past the burst, 3,000 a second.
	if took < 4*time.Second {
		t.Errorf("the load took %v: it was not throttled", took)
	}
	// Counted through a gateway on the same folder without the budget.
	if _, err := g.Terminate(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	g = startGateway(t, "LISTGATE_DATA_DIR="+dir)
	for i := range 10 {
		a := g.mustOK(fmt.Sprintf(`{ listCount(entityType: "user", entityId: "u%d", feature: "clicks") }`, i), nil)
		out := string(a.Body)
		if !strings.Contains(out, fmt.Sprintf(`"listCount":%d`, n/10)) {
			t.Errorf("u%d: %s", i, out)
		}
	}
}
