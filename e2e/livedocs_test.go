package e2e

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/gatewaytest"
)

// docs/live-lists.md's JavaScript client runs as it is written there: in
// Node, as an ES module, with e2e/node's graphql-ws and ws, against a
// gateway, through each way its subscription can end. It prints an item
// added after it subscribed; when its gateway stops (complete), and while
// none listens, it waits and subscribes again; on a gateway restarted on a
// folder restored from a backup, whose feed its position is not of, it is
// told POSITION_EXPIRED and follows the list from now, printing the next
// item; once the feature is deleted (NOT_FOUND, sent as a next message
// with errors and data null) it stops, saying why.
func TestLiveListsJavaScriptExample(t *testing.T) {
	page, err := os.ReadFile("../docs/live-lists.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```js\n(.*?)```").FindAllSubmatch(page, -1)
	if len(blocks) != 1 {
		t.Fatalf("docs/live-lists.md has %d ```js blocks, want 1", len(blocks))
	}
	node := nodeForGraphQLWS(t)
	bin := builtBinary(t)
	listen := freeAddress(t)
	dataDir := t.TempDir()
	first := startGateway(t, "LISTGATE_LISTEN="+listen, "LISTGATE_DATA_DIR="+dataDir)
	if _, out := gatewaytest.Post(t, first.base, "", `mutation { createListFeature(input: {entityType: "user", name: "reading_history", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`); out["errors"] != nil {
		t.Fatal(out)
	}

	// -e: the block as it is, an ES module; run in e2e/node, where its
	// imports resolve.
	cmd := exec.Command(node, "--input-type=module", "-e", string(blocks[0][1]))
	cmd.Dir = nodeClientDir
	cmd.Env = append(cleanEnv(), "LISTGATE_URL=ws://"+listen+"/graphql")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	exited := make(chan error, 1) // once its output is read
	go func() {
		for sc := bufio.NewScanner(stdout); sc.Scan(); {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // if it still runs
		for range lines {
		}
		<-exited
		exited <- nil
	})
	printed := func(value string) {
		t.Helper()
		timeout := time.After(time.Minute)
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("the example exited before it printed %s:\n%s", value, stderr)
				}
				if strings.HasPrefix(line, value+" ") {
					return
				}
				t.Errorf("the example printed %q", line)
			case <-timeout:
				t.Fatalf("the example printed no %s within a minute:\n%s", value, stderr)
			}
		}
	}
	add := func(g *gateway, value string) {
		t.Helper()
		if _, out := gatewaytest.Post(t, g.base, "", `mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "reading_history"}, items: [{value: "`+value+`"}]) { added } }`); out["errors"] != nil {
			t.Fatal(out)
		}
	}

	waitMetric(t, first.base, "listgate_subscriptions_active", 1, time.Minute)
	add(first, "story9")
	printed("story9")

	// A folder restored from a backup is a feed of its own: the position
	// the example holds is of the first one's.
	restored := filepath.Join(t.TempDir(), "restored")
	if _, errOut, code := runCommand(t, bin, nil, "backup", "--to", restored, "--data-dir", dataDir); code != 0 {
		t.Fatalf("listgate backup exited %d: %s", code, errOut)
	}
	first.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-first.Exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the first gateway still ran 30 s after SIGTERM")
	}
	second := startGateway(t, "LISTGATE_LISTEN="+listen, "LISTGATE_DATA_DIR="+restored)
	waitMetric(t, second.base, "listgate_subscriptions_active", 1, time.Minute)
	if !strings.Contains(stderr.String(), "POSITION_EXPIRED") {
		t.Fatalf("the example subscribed again on the restored folder without being told POSITION_EXPIRED:\n%s", stderr)
	}
	add(second, "story10")
	printed("story10")

	if _, out := gatewaytest.Post(t, second.base, "", `mutation { deleteListFeature(entityType: "user", name: "reading_history") }`); out["errors"] != nil {
		t.Fatal(out)
	}
	var exit *exec.ExitError
	select {
	case err := <-exited:
		exited <- err // for the cleanup
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr.String(), "subscription ended: NOT_FOUND") {
			t.Fatalf("once the feature was deleted the example exited with %v, saying:\n%s\nwant exit status 1 and NOT_FOUND", err, stderr)
		}
	case <-time.After(time.Minute):
		t.Fatalf("the example still ran a minute after its feature was deleted:\n%s", stderr)
	}
	t.Logf("the example's own account of the run:\n%s", stderr)
}

// freeAddress is a loopback address nothing listens on, for a gateway
// that must be started again on the same one.
func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
