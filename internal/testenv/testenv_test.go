package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// outcome records how Missing ended a test, without ending this one.
type outcome struct {
	testing.TB
	failed, skipped string
}

func (o *outcome) Helper()                           {}
func (o *outcome) Fatalf(format string, args ...any) { o.failed = fmt.Sprintf(format, args...) }
func (o *outcome) Skipf(format string, args ...any)  { o.skipped = fmt.Sprintf(format, args...) }

func TestMissingFailsOnlyWhenRequired(t *testing.T) {
	for _, c := range []struct {
		integration, ci string
		required        bool
	}{
		{"", "", false},
		{"0", "", false},
		{"1", "", true},
		{"", "true", true},
		{"0", "1", true},
	} {
		t.Setenv(IntegrationEnv, c.integration)
		t.Setenv("CI", c.ci)
		if got := Required(); got != c.required {
			t.Errorf("%s=%q CI=%q: Required() = %v, want %v", IntegrationEnv, c.integration, c.ci, got, c.required)
		}
		o := &outcome{TB: t}
		Program(o, "listgate-no-such-program", "a program no machine has")
		switch {
		case c.required && (o.failed == "" || o.skipped != ""):
			t.Errorf("%s=%q CI=%q: a missing program did not fail the test (skipped: %q)", IntegrationEnv, c.integration, c.ci, o.skipped)
		case !c.required && (o.skipped == "" || o.failed != ""):
			t.Errorf("%s=%q CI=%q: a missing program did not skip the test (failed: %q)", IntegrationEnv, c.integration, c.ci, o.failed)
		}
		for _, msg := range []string{o.failed, o.skipped} {
			if msg != "" && (!strings.Contains(msg, "listgate-no-such-program") || strings.Contains(msg, "\n")) {
				t.Errorf("the reason is not one line naming the program: %q", msg)
			}
		}
		if o.skipped != "" && !strings.Contains(o.skipped, "make test") {
			t.Errorf("the skip does not say how to run the test: %q", o.skipped)
		}
	}
}
