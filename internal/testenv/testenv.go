// Package testenv decides, in one place, what a test does when a part it
// needs from outside Go is missing: a CQL server, Java (for the nodes of
// scripts/cassandra), Chromium or Node.
//
// Integration parts are required when LISTGATE_INTEGRATION=1 or CI is set
// (scripts/test, the `make test` command, sets the first): a missing part
// then fails the test. Otherwise the test is skipped with a one-line reason,
// so that `go test ./...` on a machine without them runs every unit test.
// It must never start, stop or install anything.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// IntegrationEnv names the variable that, set to 1, makes integration parts
// required.
const IntegrationEnv = "LISTGATE_INTEGRATION"

// Required reports whether integration parts are required:
// LISTGATE_INTEGRATION=1, or CI set to anything.
func Required() bool {
	return os.Getenv(IntegrationEnv) == "1" || os.Getenv("CI") != ""
}

// Missing ends a test that lacks an integration part: it fails when parts
// are required, and is skipped otherwise. The format says what is missing
// and how to provide it, on one line.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	what := fmt.Sprintf(format, args...)
	if Required() {
		t.Fatalf("%s; required, as %s=1 or CI is set", what, IntegrationEnv)
	} else {
		t.Skipf("%s; skipped: `make test` runs it", what)
	}
}

// Program returns the path of an executable, a name looked up on PATH or a
// path, or ends the test through Missing. need says what the program is
// and how to get it.
func Program(t testing.TB, name, need string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "no %s (%s)", name, need)
	}
	return path
}
