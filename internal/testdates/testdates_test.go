// Package testdates holds one check over the whole module: test data names
// no fixed date that the clock will soon overtake. A test that stamps items
// "2026-11-01" under a 30-day TTL passes in November and fails in December;
// such timestamps must come from time.Now.
package testdates

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A date is near-term when it is no more than two years old and before
// 2100. Dates only grow older, so a file that passes today passes forever;
// far-future dates (parse bounds such as 2262 or 9999) are safe.
var (
	dateLiteral = regexp.MustCompile(`\b(\d{4})-(\d{2})-(\d{2})[T ]`)
	nanosEpoch  = regexp.MustCompile(`\b1[0-9]{18}\b`)
	horizon     = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

func nearTerm(t, now time.Time) bool {
	return !t.Before(now.AddDate(-2, 0, 0)) && t.Before(horizon)
}

func TestNoNearTermDatesInTestData(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") && !strings.Contains(rel, "testdata"+string(filepath.Separator)) {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range dateLiteral.FindAllStringSubmatch(line, -1) {
				y, _ := strconv.Atoi(m[1])
				mo, _ := strconv.Atoi(m[2])
				d, _ := strconv.Atoi(m[3])
				if nearTerm(time.Date(y, time.Month(mo), d, 0, 0, 0, 0, time.UTC), now) {
					t.Errorf("%s:%d: fixed near-term date %s: derive it from time.Now", rel, i+1, m[0][:10])
				}
			}
			for _, m := range nanosEpoch.FindAllString(line, -1) {
				ns, err := strconv.ParseInt(m, 10, 64)
				if err == nil && nearTerm(time.Unix(0, ns).UTC(), now) {
					t.Errorf("%s:%d: fixed near-term timestamp %s (%s): derive it from time.Now", rel, i+1, m, time.Unix(0, ns).UTC().Format(time.DateOnly))
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("checked %d files: the walk missed the module", checked)
	}
}

func TestNearTerm(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		date string
		near bool
	}{
		{"2026-11-01", true}, {"2026-12-20", true}, {"2030-01-01", true}, {"2025-01-01", true},
		{"2024-08-29", false}, {"2020-01-01", false}, {"2262-04-11", false}, {"9999-12-31", false},
	} {
		d, _ := time.Parse(time.DateOnly, c.date)
		if got := nearTerm(d, now); got != c.near {
			t.Errorf("nearTerm(%s) = %v, want %v", c.date, got, c.near)
		}
	}
}
