package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/gatewaytest"
)

// docs/live-lists.md's JavaScript client runs as it is written there: in
// Node, with e2e/node's graphql-ws and ws, against a gateway, it prints an
// item added after it subscribed.
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
	base := startGateway(t).base
	if _, out := gatewaytest.Post(t, base, "", `mutation { createListFeature(input: {entityType: "user", name: "reading_history", valueType: STRING, ttlSeconds: 3600, live: true}) { key } }`); out["errors"] != nil {
		t.Fatal(out)
	}

	// -e: the block as it is; run in e2e/node, where its imports resolve.
	cmd := exec.Command(node, "--input-type=module", "-e", string(blocks[0][1]))
	cmd.Dir = nodeClientDir
	cmd.Env = append(cleanEnv(), "LISTGATE_URL=ws"+strings.TrimPrefix(base, "http")+"/graphql")
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(stdout); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // the example runs until stopped
		for range lines {
		}
		cmd.Wait()
	})

	waitMetric(t, base, "listgate_subscriptions_active", 1, time.Minute)
	if _, out := gatewaytest.Post(t, base, "", `mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "reading_history"}, items: [{value: "story9"}]) { added } }`); out["errors"] != nil {
		t.Fatal(out)
	}
	timeout := time.After(time.Minute)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the example exited before it printed story9:\n%s", stderr)
			}
			if strings.HasPrefix(line, "story9 ") {
				return
			}
			t.Errorf("the example printed %q", line)
		case <-timeout:
			t.Fatalf("the example printed no story9 within a minute:\n%s", stderr)
		}
	}
}
