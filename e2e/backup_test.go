package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// listgate backup, while a gateway on the embedded store takes adds, makes
// a copy that a gateway then serves, holding every add acknowledged before
// the backup began; with the gateway stopped it opens the folder itself;
// and it refuses a folder that is not empty.
func TestBackupWhileAdding(t *testing.T) {
	bin := builtBinary(t)
	dataDir := t.TempDir()
	g := startGateway(t, "LISTGATE_DATA_DIR="+dataDir)
	g.mustOK(`mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`, nil)

	const writers, maxAdds, addsFirst = 4, 3000, 200
	var (
		mu      sync.Mutex
		acked   []string // batches of batchesPresent, one item each
		started = make(chan struct{})
		stop    = make(chan struct{})
		workers sync.WaitGroup
	)
	for w := range writers {
		workers.Go(func() {
			for n := range maxAdds / writers {
				select {
				case <-stop:
					return
				default:
				}
				batch := fmt.Sprintf("w%d.%d", w, n)
				r := g.do(`mutation($e: ID!, $v: ListValue!) { addListItems(list: {entityType: "user", entityId: $e, feature: "f"}, items: [{value: $v}]) { added } }`,
					map[string]any{"e": fmt.Sprint("e", w), "v": batch + "-0"})
				if p := r.Problem(); p != "" {
					t.Errorf("add %s: %s", batch, p)
					return
				}
				mu.Lock()
				if acked = append(acked, batch); len(acked) == addsFirst {
					close(started)
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-started:
	case <-g.Exited:
		t.Fatalf("the gateway exited: %v", g.ExitErr)
	case <-time.After(time.Minute):
		t.Fatalf("%d adds were not acknowledged within a minute", addsFirst)
	}

	mu.Lock()
	before := slices.Clone(acked)
	mu.Unlock()
	backup := filepath.Join(t.TempDir(), "backup")
	out, errOut, code := runCommand(t, bin, nil, "backup", "--to", backup, "--data-dir", dataDir)
	mu.Lock()
	during := len(acked) - len(before)
	mu.Unlock()
	close(stop)
	workers.Wait()
	if code != 0 || !strings.Contains(out, "the gateway serving "+dataDir+" backed it up to "+backup) {
		t.Fatalf("listgate backup exited %d, wrote %q and on stderr %q", code, out, errOut)
	}

	// Into a folder that is not empty, or onto a file: refused, and
	// nothing there touched.
	_, errOut, code = runCommand(t, bin, nil, "backup", "--to", backup, "--data-dir", dataDir)
	if want := backup + " exists and is not an empty folder"; code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("a backup into the folder of another exited %d and wrote %q, want 1 and %q", code, errOut, want)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = runCommand(t, bin, nil, "backup", "--to", file, "--data-dir", dataDir)
	if b, _ := os.ReadFile(file); code != 1 || !strings.Contains(errOut, "exists and is not an empty folder") || string(b) != "mine" {
		t.Errorf("a backup onto a file exited %d and wrote %q; the file holds %q", code, errOut, b)
	}

	mu.Lock()
	all := slices.Clone(acked)
	mu.Unlock()
	g.stop()
	if g.ExitErr != nil {
		t.Fatalf("the gateway exited with %v on SIGTERM", g.ExitErr)
	}
	// With no gateway serving, the command opens the folder: into an
	// empty folder, the copy holds every add acknowledged.
	stopped := t.TempDir()
	out, errOut, code = runCommand(t, bin, nil, "backup", "--to", stopped, "--data-dir", dataDir)
	if code != 0 || !strings.Contains(out, "(no gateway serves it)") {
		t.Fatalf("listgate backup of a stopped gateway's folder exited %d, wrote %q and on stderr %q", code, out, errOut)
	}

	for _, tc := range []struct {
		dir  string
		want []string
	}{{backup, before}, {stopped, all}} {
		restored := startGateway(t, "LISTGATE_DATA_DIR="+tc.dir)
		if code, _ := readyz(t, restored.base); code != 200 {
			t.Fatalf("the gateway on %s: /readyz answered %d", tc.dir, code)
		}
		present := batchesPresent(t, restored.base, writers)
		missing := 0
		for _, b := range tc.want {
			if present[b] != 1 {
				missing++
			}
		}
		if missing > 0 {
			t.Errorf("the backup in %s lacks %d of the %d adds acknowledged before it began", tc.dir, missing, len(tc.want))
		}
		t.Logf("%s: %d adds acknowledged before the backup began, all there; %d items in all", tc.dir, len(tc.want), len(present))
		restored.stop()
	}
	t.Logf("adds acknowledged while the live backup ran: %d; in all: %d", during, len(all))
}

// A gateway on a folder restored from listgate backup follows a change
// feed of its own: a position its original gave, before the backup or
// after it, is POSITION_EXPIRED there (of another data folder), however
// many adds the restored gateway has taken, rather than resumed in the
// wrong place (as reported: after B2, B3 and B4 were added there, a
// client resuming after the original's position got B4 alone). Its own
// positions are resumed.
func TestRestoredBackupRefusesPositionsOfTheOriginal(t *testing.T) {
	bin := builtBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dataDir := t.TempDir()
	g := startGateway(t, "LISTGATE_DATA_DIR="+dataDir)
	createFeature(t, g, "user")
	before := positionOf(t, ctx, g, "user", "u1", "A1").position
	backup := filepath.Join(t.TempDir(), "backup")
	if out, errOut, code := runCommand(t, bin, nil, "backup", "--to", backup, "--data-dir", dataDir); code != 0 {
		t.Fatalf("listgate backup exited %d, wrote %q and on stderr %q", code, out, errOut)
	}
	after := positionOf(t, ctx, g, "user", "u1", "B1").position
	g.stop()

	restored := startGateway(t, "LISTGATE_DATA_DIR="+backup)
	for _, v := range []string{"B2", "B3", "B4"} {
		addItems(t, restored.base, "", "user", "u1", "f", [2]string{v, ""})
	}
	refusedWith(t, ctx, restored, "a position of the original, before the backup", listVars("user", "u1", "after", before), "POSITION_EXPIRED")
	refusedWith(t, ctx, restored, "a position of the original, after the backup", listVars("user", "u1", "after", after), "POSITION_EXPIRED")
	own := positionOf(t, ctx, restored, "user", "u1", "C1").position
	addItems(t, restored.base, "", "user", "u1", "f", [2]string{"C2", ""})
	s := subscribeFeed(t, ctx, restored.base, listVars("user", "u1", "after", own))
	if got := values(s.await(1, 30*time.Second)); !slices.Equal(got, []string{"C2"}) {
		t.Errorf("after its own position: %v, want [C2]", got)
	}
}
