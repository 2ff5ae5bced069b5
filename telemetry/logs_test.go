package telemetry

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// A duration is logged as float seconds under its key with "_s" added, in
// JSON and in text, at the top level, in a group and through With.
func TestDurationsAreLoggedInSeconds(t *testing.T) {
	log := func(format string) string {
		var b bytes.Buffer
		l := NewLogger(&b, format, slog.LevelInfo).With("timeout", 30*time.Second)
		l.Info("done", "duration", 12300*time.Microsecond, slog.Group("store", slog.Duration("wait", 1500*time.Millisecond)), "count", 3)
		return b.String()
	}

	var got struct {
		Duration *float64 `json:"duration"`
		Seconds  float64  `json:"duration_s"`
		Timeout  float64  `json:"timeout_s"`
		Store    struct {
			Wait float64 `json:"wait_s"`
		} `json:"store"`
		Count int `json:"count"`
	}
	line := log("json")
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("%v: %s", err, line)
	}
	if got.Duration != nil || got.Seconds != 0.0123 || got.Timeout != 30 || got.Store.Wait != 1.5 || got.Count != 3 {
		t.Errorf("JSON: %s", line)
	}

	line = log("text")
	for _, want := range []string{" duration_s=0.0123 ", " timeout_s=30 ", " store.wait_s=1.5 ", " count=3"} {
		if !strings.Contains(line, want) {
			t.Errorf("text: no %q in %s", want, line)
		}
	}
}
