package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/internal/testenv"
)

// runCommand runs a listgate binary to its end with args and env (after
// cleanEnv), and returns what it wrote and its exit code. One that is
// still running after 30 s is killed and fails the test.
func runCommand(t *testing.T, bin string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(cleanEnv(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("listgate %s still ran after 30 s; it wrote:\n%s%s", strings.Join(args, " "), out.String(), errOut.String())
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func builtBinary(t *testing.T) string {
	t.Helper()
	bin, err := gatewayBinary()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// --version prints three lines and exits 0. Built by `make build` it shows
// the `git describe` version and the commit; built by `go build` it shows
// what the toolchain recorded, or dev.
func TestVersion(t *testing.T) {
	goLine := fmt.Sprintf("go       %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	check := func(bin string) []string {
		t.Helper()
		out, errOut, code := runCommand(t, bin, []string{"LISTGATE_VERSION=v9.9.9"}, "--version")
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if code != 0 || errOut != "" || len(lines) != 3 || !strings.HasPrefix(lines[0], "listgate ") ||
			!strings.HasPrefix(lines[1], "revision ") || lines[2] != goLine {
			t.Fatalf("%s --version exited %d, wrote:\n%s\nand on stderr:\n%s", bin, code, out, errOut)
		}
		return lines
	}
	check(builtBinary(t))

	makeProgram := testenv.Program(t, "make", "GNU make, for `make build`")
	git := testenv.Program(t, "git", "Git, which `make build` asks for the version")
	bin := filepath.Join(t.TempDir(), "listgate")
	build := exec.Command(makeProgram, "build", "BIN="+bin)
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	describe, err := exec.Command(git, "-C", "..", "describe", "--tags", "--always", "--dirty").Output()
	if err != nil {
		t.Fatalf("git describe: %v", err)
	}
	head, err := exec.Command(git, "-C", "..", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatalf("git rev-parse HEAD: %v", err)
	}
	lines := check(bin)
	if lines[0] != "listgate "+strings.TrimSpace(string(describe)) || !strings.HasPrefix(lines[1], "revision "+strings.TrimSpace(string(head))) {
		t.Fatalf("make build's binary says\n%s\nnot version %s, revision %s", strings.Join(lines, "\n"), describe, head)
	}
}

// --help and -h write the usage to stdout and exit 0; a wrong flag exits
// 1 with one line saying so.
func TestHelp(t *testing.T) {
	bin := builtBinary(t)
	for _, arg := range []string{"--help", "-h"} {
		out, errOut, code := runCommand(t, bin, nil, arg)
		if code != 0 || errOut != "" || !strings.Contains(out, "wins over its variable") ||
			!strings.Contains(out, "--cql-hosts string  (LISTGATE_CQL_HOSTS)") {
			t.Fatalf("%s exited %d, wrote:\n%.600s\nand on stderr:\n%s", arg, code, out, errOut)
		}
	}
	out, errOut, code := runCommand(t, bin, nil, "--cql-host", "10.0.0.1")
	if want := "listgate: flag provided but not defined: -cql-host (listgate --help lists the flags)\n"; code != 1 || out != "" || errOut != want {
		t.Fatalf("a misspelt flag exited %d, wrote %q and on stderr %q, want %q", code, out, errOut, want)
	}
}

// A second gateway on the data folder of a running one exits 1 saying
// which process holds it; the first goes on serving.
func TestDataFolderInUse(t *testing.T) {
	dir := t.TempDir()
	first := startGateway(t, "LISTGATE_DATA_DIR="+dir)
	_, errOut, code := runCommand(t, builtBinary(t), []string{"LISTGATE_LISTEN=127.0.0.1:0"}, "--data-dir", dir)
	want := fmt.Sprintf("listgate: the data folder %s is in use by another listgate process (pid %d); stop it, or use --data-dir to name another folder\n", dir, first.Cmd.Process.Pid)
	if code != 1 || !strings.HasSuffix(errOut, want) {
		t.Fatalf("the second gateway exited %d and wrote %q, want %q", code, errOut, want)
	}
	first.alive()
}

// Starts that would open the gateway to more than they mean to exit 1
// naming the flag that says so: --mode dev without credentials on an
// address beyond loopback, and --mode prod with JWTs but no audience.
// With the flag given, they serve.
func TestUnsafeStartsAreRefused(t *testing.T) {
	bin := builtBinary(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		flag string
	}{
		{"dev without credentials on 0.0.0.0", []string{"--listen", "0.0.0.0:0"}, "--dev-allow-remote"},
		{"dev without credentials on a host name", []string{"--listen", "gateway.example:0"}, "--dev-allow-remote"},
		{"prod with a JWKS and no audience", []string{"--mode", "prod", "--listen", "127.0.0.1:0", "--jwt-jwks-url", "https://idp.example.com/keys"}, "--jwt-audience"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCommand(t, bin, nil, append(tc.args, "--data-dir", dir)...)
			if code != 1 || !strings.Contains(errOut, tc.flag) {
				t.Fatalf("exited %d, wrote %q; want 1, naming %s", code, errOut, tc.flag)
			}
		})
	}
	g := startGateway(t, "LISTGATE_LISTEN=0.0.0.0:0", "LISTGATE_DEV_ALLOW_REMOTE=true")
	g.mustOK(`{ listFeatures { key } }`, nil)
}

// A gateway whose consistency levels would let a reader of the change
// feed pass a record it cannot read yet (ONE and ONE on three replicas)
// refuses to start, naming both flags; the default levels on the same
// keyspace start.
func TestNonOverlappingConsistencyIsRefused(t *testing.T) {
	bin := builtBinary(t)
	env := []string{"LISTGATE_CQL_HOSTS=" + strings.Join(cqltest.Hosts(t), ","), "LISTGATE_CQL_KEYSPACE=three_replicas", "LISTGATE_MIGRATE=true",
		"LISTGATE_CQL_REPLICATION={'class': 'SimpleStrategy', 'replication_factor': 3}", "LISTGATE_LISTEN=127.0.0.1:0"}
	_, errOut, code := runCommand(t, bin, append(env, "LISTGATE_CQL_READ_CONSISTENCY=ONE", "LISTGATE_CQL_WRITE_CONSISTENCY=ONE"))
	if code != 1 || !strings.Contains(errOut, "--cql-read-consistency ONE and --cql-write-consistency ONE") || !strings.Contains(errOut, "3 replicas") {
		t.Fatalf("ONE and ONE on 3 replicas: exited %d, wrote %q; want 1, naming both flags", code, errOut)
	}
	g := startGateway(t, append(env, "LISTGATE_CQL_READ_CONSISTENCY=ONE", "LISTGATE_CQL_WRITE_CONSISTENCY=ALL")...)
	g.mustOK(`{ listFeatures { key } }`, nil)
}
