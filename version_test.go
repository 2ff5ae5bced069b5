package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

func noEnv(string) string { return "" }

// --version prints the stamped version, the revision and the Go version,
// and run returns nil (main exits 0), whatever LISTGATE_* says: no variable
// sets --version, and none is read before it.
func TestVersionFlag(t *testing.T) {
	defer func(v, r string) { version, revision = v, r }(version, revision)
	version, revision = "v1.2.3-4-gabcdef0", "abcdef0123"
	env := map[string]string{"LISTGATE_MODE": "prod", "LISTGATE_CQL_TIMEOUT": "soon"}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, func(k string) string { return env[k] }, &out, io.Discard); err != nil {
		t.Fatalf("--version: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 || lines[0] != "listgate v1.2.3-4-gabcdef0" || !strings.HasPrefix(lines[1], "revision abcdef0123") ||
		lines[2] != fmt.Sprintf("go       %s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH) {
		t.Fatalf("--version printed:\n%s", out.String())
	}
	// A deployment's LISTGATE_VERSION is not the flag.
	c, err := parseConfig(nil, func(k string) string { return map[string]string{"LISTGATE_VERSION": "v1.2.3"}[k] }, io.Discard)
	if err != nil || c.PrintVersion {
		t.Fatalf("LISTGATE_VERSION=v1.2.3: PrintVersion %v, err %v", c.PrintVersion, err)
	}
}

// --help (and -h) writes every flag of the FlagSet with its variable and
// its default to stdout, and run returns nil; a wrong flag is a one-line
// error pointing at --help.
func TestHelpListsEveryFlagWithItsVariable(t *testing.T) {
	var help string
	for _, arg := range []string{"--help", "-h", "-help"} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), []string{"--listen", "127.0.0.1:0", arg}, noEnv, &out, &errOut); err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		if errOut.Len() > 0 || (help != "" && out.String() != help) {
			t.Fatalf("%s wrote %q to stderr and\n%s", arg, errOut.String(), out.String())
		}
		help = out.String()
	}
	if !strings.Contains(help, "a flag on the command line wins over its variable") {
		t.Errorf("the header does not say flags win over variables:\n%.500s", help)
	}
	fs, _ := newFlagSet(&config{})
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		line := regexp.MustCompile(`(?m)^  --` + regexp.QuoteMeta(f.Name) + `( .*)?$`).FindString(help)
		switch {
		case line == "":
			t.Errorf("--%s is not in --help", f.Name)
		case commandOnly[f.Name]:
			if strings.Contains(line, "LISTGATE_") {
				t.Errorf("--%s, which no variable sets, shows one: %q", f.Name, line)
			}
		case !strings.Contains(line, "("+envName(f.Name)):
			t.Errorf("--%s does not show %s: %q", f.Name, envName(f.Name), line)
		case f.DefValue != "" && !strings.Contains(line, "default "+f.DefValue) && !strings.Contains(line, fmt.Sprintf("default %q", f.DefValue)):
			t.Errorf("--%s does not show its default %s: %q", f.Name, f.DefValue, line)
		}
	})
	if got := strings.Count(help, "\n  --"); got != n || n < 60 {
		t.Errorf("--help lists %d flags; the FlagSet has %d", got, n)
	}
	if !strings.Contains(help, "--cql-hosts string  (LISTGATE_CQL_HOSTS)") || !strings.Contains(help, "--memory-limit size  (LISTGATE_MEMORY_LIMIT, default 1GiB)") {
		t.Errorf("--help:\n%s", help)
	}
	_, err := parseConfig([]string{"--cql-host", "x"}, noEnv, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-cql-host") || !strings.Contains(err.Error(), "--help") {
		t.Errorf("a misspelt flag: %v", err)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// /metrics shows listgate_build_info with the binary's version, revision
// and Go version.
func TestBuildInfoOnMetrics(t *testing.T) {
	base := start(t, "--data-dir", t.TempDir())
	b := readBuild()
	want := fmt.Sprintf(`listgate_build_info{go_version=%q,revision=%q,version=%q} 1`, b.GoVersion, b.Revision, b.Version)
	if status, body := get(t, base+"/metrics"); status != http.StatusOK || !strings.Contains(body, "\n"+want+"\n") {
		t.Fatalf("/metrics answered %d without %s:\n%s", status, want, grepLines(body, "build_info"))
	}
}

func grepLines(text, word string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, word) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
