package deploy

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildListgate builds the listgate command from the module above this
// one, as `go build` does, and returns its path.
func buildListgate(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "listgate")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	build.Dir = ".."
	build.Env = append(os.Environ(), "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of listgate: %v\n%s", err, out)
	}
	return bin
}

// runListgate runs the command to its end, within 30 s, and returns what
// it wrote.
func runListgate(bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// cleanEnv is this process's environment without LISTGATE_ variables, which
// would configure the command.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LISTGATE_") {
			env = append(env, kv)
		}
	}
	return env
}

// commandLine is what `listgate --help` lists: flag names and their
// environment variables.
type commandLine struct {
	flags, env map[string]bool
}

var helpFlagRE = regexp.MustCompile(`(?m)^  --([a-z0-9-]+)(?: [a-z]+)?(?:  \((LISTGATE_[A-Z0-9_]+))?`)

func readHelp(t *testing.T, bin string) commandLine {
	t.Helper()
	out, err := runListgate(bin, "--help")
	if err != nil {
		t.Fatalf("listgate --help: %v\n%s", err, out)
	}
	cli := commandLine{flags: map[string]bool{}, env: map[string]bool{}}
	for _, m := range helpFlagRE.FindAllStringSubmatch(out, -1) {
		cli.flags[m[1]] = true
		if m[2] != "" {
			cli.env[m[2]] = true
		}
	}
	// What the rest of the test relies on, so that a change of --help's
	// layout fails here and not as a wrong flag.
	for _, f := range []string{"listen", "metrics-listen", "mode", "memory-limit", "api-keys-file", "cql-hosts"} {
		if !cli.flags[f] {
			t.Fatalf("listgate --help lists no --%s; it wrote:\n%s", f, out)
		}
	}
	if !cli.env["LISTGATE_CQL_PASSWORD"] {
		t.Fatalf("listgate --help names no LISTGATE_CQL_PASSWORD; it wrote:\n%s", out)
	}
	return cli
}

// listeners are the addresses a running listgate serves, by the flag that
// opened each.
type listeners map[string]string

// startListgate runs listgate on the embedded store with its API and its
// metrics on loopback ports of their own, and returns their addresses once
// its start-up line names them. It is stopped when the test ends.
func startListgate(t *testing.T, bin string) listeners {
	t.Helper()
	cmd := exec.Command(bin, "--listen=127.0.0.1:0", "--metrics-listen=127.0.0.1:0",
		"--data-dir="+t.TempDir(), "--log-format=text", "--log-level=info")
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	serving := make(chan listeners, 1)
	go func() {
		found := false
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if line := sc.Text(); !found && strings.Contains(line, `msg="listgate serving"`) {
				found = true
				serving <- listeners{"listen": field(line, "listen"), "metrics-listen": field(line, "metrics_listen")}
			}
		}
		io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("listgate exited with %v on SIGTERM", err)
			}
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Errorf("listgate still ran 30 s after SIGTERM")
		}
	})
	select {
	case l := <-serving:
		if l["listen"] == "" || l["metrics-listen"] == "" {
			t.Fatalf("listgate's start-up line names listeners %v", l)
		}
		return l
	case err := <-exited:
		t.Fatalf("listgate exited before serving: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("listgate did not serve within 60 s")
	}
	return nil
}

// field returns the value of key=value in a text log line.
func field(line, key string) string {
	m := regexp.MustCompile(`(?:^| )` + regexp.QuoteMeta(key) + `=(\S+)`).FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	return m[1]
}

// get asks the listener a flag opened for path, and returns the status
// and the body.
func (l listeners) get(t *testing.T, flag, path string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + l[flag] + path)
	if err != nil {
		t.Fatalf("GET %s on --%s: %v", path, flag, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// No go.work may choose this module's dependencies, or the product's: each
// module builds from its own go.mod and go.sum, as CI does.
func TestNoWorkspace(t *testing.T) {
	cmd := exec.Command("go", "env", "GOWORK")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOWORK=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if work := strings.TrimSpace(string(out)); work != "" && work != "off" {
		t.Fatalf("the go command uses the workspace %s: remove it", work)
	}
}
