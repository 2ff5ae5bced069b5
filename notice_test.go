package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNoticeNamesEveryModule keeps NOTICE current: it names every module
// compiled into the binary, and no other.
func TestNoticeNamesEveryModule(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}}{{end}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	want := map[string]bool{}
	for _, path := range strings.Fields(string(out)) {
		want[path] = true
	}
	notice, err := os.ReadFile("NOTICE")
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, line := range strings.Split(string(notice), "\n") {
		// A module's line: two spaces, its path (it has a dot), its license.
		if f := strings.Fields(line); strings.HasPrefix(line, "  ") && len(f) >= 2 && strings.Contains(f[0], ".") {
			named[f[0]] = true
		}
	}
	for path := range want {
		if !named[path] {
			t.Errorf("NOTICE does not name %s, which the binary bundles", path)
		}
	}
	for path := range named {
		if !want[path] {
			t.Errorf("NOTICE names %s, which the binary no longer bundles", path)
		}
	}
}
