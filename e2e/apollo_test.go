package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/testenv"
)

// apolloResult is one operation apollo.mjs ran.
type apolloResult struct {
	Op    string          `json:"op"`
	Data  json.RawMessage `json:"data"`
	Codes []string        `json:"codes"`
}

// A real Apollo Client with Apollo's persisted-query link and a manifest
// that @apollo/generate-persisted-query-manifest wrote from its operations
// (e2e/node/apollo): in enforce mode its operations run by id and an
// operation outside the manifest is refused QUERY_NOT_IN_SAFELIST; a bad
// manifest read on SIGHUP keeps the documents in use; in audit mode the
// operation outside runs, and is counted.
func TestApolloClientTrustedDocuments(t *testing.T) {
	node := nodeAtLeast(t, "Node.js on PATH: this test runs Apollo Client", nodeProject)
	npx := testenv.Program(t, "npx", "npx on PATH: this test runs @apollo/generate-persisted-query-manifest")
	if _, err := os.Stat(filepath.Join(nodeClientDir, "node_modules", "@apollo", "client", "package.json")); err != nil {
		testenv.Missing(t, "no @apollo/client in e2e/node/node_modules (run `npm ci` in e2e/node; scripts/test does)")
	}
	dir := t.TempDir()
	manifest := filepath.Join(dir, "manifest.json")
	config := filepath.Join(dir, "config.json")
	if err := os.WriteFile(config, []byte(`{"documents": ["apollo/*.graphql"], "output": "`+manifest+`"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	gen := exec.Command(npx, "--no-install", "generate-persisted-query-manifest", "-c", config)
	gen.Dir = nodeClientDir
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("generate-persisted-query-manifest: %v\n%s", err, out)
	}
	good, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	// The client's copy, as its bundle holds it; the gateway's may change.
	bundled := filepath.Join(dir, "bundled.json")
	if err := os.WriteFile(bundled, good, 0o644); err != nil {
		t.Fatal(err)
	}

	const app, admin = "apollo-app-key", "apollo-admin-key"
	hash := func(k string) string { s := sha256.Sum256([]byte(k)); return hex.EncodeToString(s[:]) }
	keys := "LISTGATE_API_KEYS=app " + hash(app) + " lists:read;admin " + hash(admin) + " lists:read,lists:write,features:admin,documents:any"
	run := func(g *gateway, ops ...string) map[string]apolloResult {
		t.Helper()
		cmd := exec.Command(node, append([]string{"apollo.mjs", g.base + "/graphql", app, bundled}, ops...)...)
		cmd.Dir = nodeClientDir
		var out, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("apollo.mjs: %v\n%s", err, stderr.String())
		}
		results := map[string]apolloResult{}
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var r apolloResult
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("apollo.mjs printed %q", line)
			}
			results[r.Op] = r
		}
		return results
	}

	g := startGateway(t, keys, "LISTGATE_TRUSTED_DOCUMENTS="+manifest)
	requestAs(t, g.base, admin, `mutation { createListFeature(input: {entityType: "user", name: "reading_history", valueType: STRING, ttlSeconds: 3600}) { key } }`, nil)
	requestAs(t, g.base, admin, `mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "reading_history"}, items: [{value: "story1"}]) { added } }`, nil)
	check := func(r map[string]apolloResult) {
		t.Helper()
		if f := r["Features"]; !strings.Contains(string(f.Data), `"user#reading_history|"`) {
			t.Errorf("Features by its id: %+v", f)
		}
		if rd := r["Reads"]; !strings.Contains(string(rd.Data), `"story1"`) {
			t.Errorf("Reads by its id: %s %v", rd.Data, rd.Codes)
		}
	}
	r := run(g, "Features", "Reads", "Unlisted")
	check(r)
	if u := r["Unlisted"]; len(u.Codes) != 1 || u.Codes[0] != "QUERY_NOT_IN_SAFELIST" {
		t.Errorf("an operation outside the manifest, in enforce mode: %s %v", u.Data, u.Codes)
	}
	if n := metric(t, g.base, "listgate_untrusted_operations_total", `mode="enforce"`); n != 1 {
		t.Errorf("listgate_untrusted_operations_total{mode=enforce} = %v, want 1", n)
	}
	if n := metric(t, g.base, "listgate_trusted_documents"); n != 2 {
		t.Errorf("listgate_trusted_documents = %v, want 2", n)
	}

	// A bad manifest, read on SIGHUP, keeps the documents in use.
	if err := os.WriteFile(manifest, []byte(`{"format": "apollo-persisted-query-manifest", "version": 1, "operations": [`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := g.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	// (The change itself may be read too, before or after the signal.)
	for deadline := time.Now().Add(20 * time.Second); metric(t, g.base, "listgate_trusted_documents_reloads_total", `outcome="failed"`) < 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no failed reading of the bad manifest after 20 s")
		}
	}
	if n := metric(t, g.base, "listgate_trusted_documents_reloads_total", `outcome="ok"`); n != 0 {
		t.Fatalf("a bad manifest was read: %v readings ok", n)
	}
	check(run(g, "Features", "Reads"))
	if !strings.Contains(g.stderr.String(), "reading the trusted documents failed") {
		t.Errorf("the failed reading was not logged:\n%s", g.stderr.String())
	}
	if err := os.WriteFile(manifest, good, 0o644); err != nil {
		t.Fatal(err)
	}

	audit := startGateway(t, keys, "LISTGATE_TRUSTED_DOCUMENTS="+manifest, "LISTGATE_TRUSTED_DOCUMENTS_MODE=audit")
	requestAs(t, audit.base, admin, `mutation { createListFeature(input: {entityType: "user", name: "reading_history", valueType: STRING, ttlSeconds: 3600}) { key } }`, nil)
	requestAs(t, audit.base, admin, `mutation { addListItems(list: {entityType: "user", entityId: "u1", feature: "reading_history"}, items: [{value: "story1"}]) { added } }`, nil)
	r = run(audit, "Features", "Reads", "Unlisted")
	check(r)
	if u := r["Unlisted"]; len(u.Codes) != 0 || !strings.Contains(string(u.Data), "ttlSeconds") {
		t.Errorf("an operation outside the manifest, in audit mode: %s %v", u.Data, u.Codes)
	}
	if n := metric(t, audit.base, "listgate_untrusted_operations_total", `mode="audit"`); n != 1 {
		t.Errorf("listgate_untrusted_operations_total{mode=audit} = %v, want 1", n)
	}
}
