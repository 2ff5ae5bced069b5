package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// Pages others write on their own branches; the README and cluster.md link
// them before they are merged, so until then each is a stub holding only
// "<!-- stub -->".
var expectedDocs = []string{"docs/cluster-tls.md", "docs/deploy.md", "docs/embedded-and-schema.md"}

var (
	fence      = regexp.MustCompile("(?ms)^```.*?^```")
	codeSpan   = regexp.MustCompile("`[^`\n]*`")
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	mdHeading  = regexp.MustCompile(`(?m)^#{1,6}[ \t]+(.+?)[ \t#]*$`)
	headingURL = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// docPages returns README.md and every page under docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, pages...)
}

// Every relative link of README.md and docs/*.md names a file that exists,
// and every #anchor into a Markdown file names one of its headings.
func TestDocsLinks(t *testing.T) {
	anchors := map[string]map[string]bool{} // by cleaned path
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		anchors[path] = headingAnchors(string(text))
		return anchors[path]
	}
	for _, page := range docPages(t) {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		prose := codeSpan.ReplaceAllString(fence.ReplaceAllString(string(text), ""), "")
		for _, m := range mdLink.FindAllStringSubmatch(prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			if path == "" {
				path = page
			} else {
				path = filepath.Join(filepath.Dir(page), path)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links %s: %v", page, target, err)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchorsOf(filepath.Clean(path))[anchor] {
				t.Errorf("%s links %s: %s has no heading #%s", page, target, path, anchor)
			}
		}
	}
}

// The README's contents list every page under docs/, and the pages being
// written elsewhere are there, if only as stubs.
func TestDocsContents(t *testing.T) {
	for _, page := range expectedDocs {
		if _, err := os.Stat(page); err != nil {
			t.Errorf("%s: %v (a stub holding <!-- stub --> will do until it is merged)", page, err)
		}
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range docPages(t)[1:] {
		if !strings.Contains(string(readme), "]("+page) {
			t.Errorf("README.md does not link %s", page)
		}
	}
}

// docs/queries.md goes on from where the walkthrough ends: its GraphQL
// blocks run, after the walkthrough's, against one fresh server.
func TestDocsQueries(t *testing.T) {
	text, err := os.ReadFile("docs/queries.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := graphQLBlocks(string(text))
	if len(blocks) < 5 {
		t.Fatalf("found %d GraphQL blocks in docs/queries.md", len(blocks))
	}
	runGraphQLBlocks(t, start(t, "--data-dir", t.TempDir()), append(walkthroughBlocks(t), blocks...))
}

// headingAnchors returns the anchors GitHub makes of a Markdown text's
// headings: lower case, spaces to '-', punctuation other than '-' and '_'
// dropped, and "-1", "-2", … after a repeated one.
func headingAnchors(markdown string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, m := range mdHeading.FindAllStringSubmatch(fence.ReplaceAllString(markdown, ""), -1) {
		anchor := githubAnchor(headingURL.ReplaceAllString(m[1], "$1"))
		if n := seen[anchor]; n > 0 {
			anchors[anchor+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[anchor] = true
		}
		seen[anchor]++
	}
	return anchors
}

func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestDocsAnchorRule(t *testing.T) {
	for heading, want := range map[string]string{
		"Windows, counts, searches, caps and batches": "windows-counts-searches-caps-and-batches",
		"From Go: a typed client":                     "from-go-a-typed-client",
		"What `make test` needs":                      "what-make-test-needs",
		"On a ScyllaDB or Cassandra cluster":          "on-a-scylladb-or-cassandra-cluster",
		"store_keys and list-items":                   "store_keys-and-list-items",
	} {
		if got := githubAnchor(heading); got != want {
			t.Errorf("githubAnchor(%q) = %q, want %q", heading, got, want)
		}
	}
}
