package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/listgate/listgate/internal/testenv"
)

// The Node versions the tests' JavaScript needs, as the "engines" of a
// package.json say: the whole of e2e/node (its own engines, the strictest
// of its dependencies'), or the graphql-ws client alone (graphql-ws's).
var (
	nodeProject   = filepath.Join(nodeClientDir, "package.json")
	nodeGraphQLWS = filepath.Join(nodeClientDir, "node_modules", "graphql-ws", "package.json")
)

// nodeAtLeast returns the path of Node.js, ending the test through
// testenv.Missing when there is none (need says what for), and failing it,
// whether or not integration parts are required, when it is older than the
// engines of packageJSON require: an old Node is no missing part, and
// would fail later, less clearly, or not at all where it should.
func nodeAtLeast(t *testing.T, need, packageJSON string) string {
	t.Helper()
	node := testenv.Program(t, "node", need)
	minimum := enginesNode(t, packageJSON)
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("%s --version: %v", node, err)
	}
	have := strings.TrimSpace(string(out))
	if !versionAtLeast(t, have, minimum) {
		t.Fatalf("%s is Node %s: this test needs Node %s or later (\"engines\" of %s)", node, have, minimum, filepath.Join("e2e", packageJSON))
	}
	return node
}

// enginesNode returns the least Node version packageJSON's "engines"
// allow: its "node" must be ">=X[.Y[.Z]]".
func enginesNode(t *testing.T, packageJSON string) string {
	t.Helper()
	b, err := os.ReadFile(packageJSON)
	if err != nil {
		t.Fatal(err)
	}
	var p struct{ Engines struct{ Node string } }
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%s: %v", packageJSON, err)
	}
	minimum, ok := strings.CutPrefix(strings.ReplaceAll(p.Engines.Node, " ", ""), ">=")
	if !ok {
		t.Fatalf("%s: engines.node %q: want \">=X.Y.Z\"", packageJSON, p.Engines.Node)
	}
	return minimum
}

// versionAtLeast reports whether version v (such as "v20.20.2") is at least
// minimum (such as "22.15.0" or "20").
func versionAtLeast(t *testing.T, v, minimum string) bool {
	t.Helper()
	return slices.Compare(versionNumbers(t, v), versionNumbers(t, minimum)) >= 0
}

// versionNumbers returns X, Y and Z of "vX.Y.Z", "X.Y" or "X" (0 for what
// is left out).
func versionNumbers(t *testing.T, v string) []int {
	t.Helper()
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(parts) > 3 {
		t.Fatalf("version %q: want X.Y.Z", v)
	}
	n := make([]int, 3)
	for i, p := range parts {
		var err error
		if n[i], err = strconv.Atoi(p); err != nil {
			t.Fatalf("version %q: want X.Y.Z", v)
		}
	}
	return n
}

// e2e/node/package.json's engines is the strictest Node its locked
// dependencies require, so that it says what an install needs; and the
// README says the same.
func TestNodeEnginesCoverTheLock(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(nodeClientDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct{ Engines json.RawMessage }
	}
	if err := json.Unmarshal(b, &lock); err != nil {
		t.Fatal(err)
	}
	strictest, by := "0", ""
	for name, p := range lock.Packages {
		var e struct{ Node string }
		if name == "" || json.Unmarshal(p.Engines, &e) != nil { // engines may be a list, which says nothing of Node
			continue
		}
		if minimum, ok := strings.CutPrefix(strings.ReplaceAll(e.Node, " ", ""), ">="); ok && !strings.ContainsAny(minimum, "|<>^~") && strings.TrimPrefix(minimum, "v") != "" {
			if minimum = strings.TrimPrefix(minimum, "v"); !versionAtLeast(t, strictest, minimum) {
				strictest, by = minimum, name
			}
		}
	}
	if got := enginesNode(t, nodeProject); slices.Compare(versionNumbers(t, got), versionNumbers(t, strictest)) != 0 {
		t.Errorf("%s: engines.node >=%s; %s requires >=%s", nodeProject, got, by, strictest)
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("Node %s or later", strictest); !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say %q", want)
	}
}

// nodeForGraphQLWS returns the path of a Node.js that runs the graphql-ws
// client, as nodeAtLeast does, once e2e/node's dependencies are installed.
func nodeForGraphQLWS(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(nodeGraphQLWS); err != nil {
		testenv.Missing(t, "no graphql-ws in e2e/node/node_modules (run `npm ci` in e2e/node; scripts/test does)")
	}
	return nodeAtLeast(t, "Node.js on PATH: this test subscribes through the graphql-ws client", nodeGraphQLWS)
}
