package cql

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedLog is a log a timer writes while the test reads it.
type lockedLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) lines(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// Thousands of slow statements in an interval make two lines: the first
// statement's, at once, and, when the interval ends, one that counts the
// rest and shows the slowest. A slow statement after a quiet interval is
// logged at once again; closing logs what is counted, and then nothing.
func TestSlowStatementsAreSummarized(t *testing.T) {
	out := &lockedLog{}
	l := newSlowLog(slog.New(slog.NewJSONHandler(out, nil)), 200*time.Millisecond)
	st := func(took time.Duration) slowStatement {
		return slowStatement{ctx: context.Background(), statement: "SELECT list_items", query: "SELECT … ?", took: took, host: "127.0.0.1", attempt: 1}
	}
	const n = 5000
	for i := range n {
		took := time.Second + time.Duration(i%977)*time.Millisecond
		l.record(st(took), time.Now())
	}
	waitLines := func(want int) []map[string]any {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			lines := out.lines(t)
			if len(lines) >= want || time.Now().After(deadline) {
				return lines
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	lines := waitLines(2)
	if len(lines) != 2 || lines[0]["msg"] != "slow CQL statement" || lines[1]["slow"] != float64(n-1) || lines[1]["duration"] != float64(time.Second+976*time.Millisecond) {
		t.Fatalf("%d slow statements logged %d lines, want the first and a summary of the %d others showing the slowest (1.976 s): %v", n, len(lines), n-1, lines)
	}
	l.record(st(time.Second), time.Now().Add(time.Hour)) // after a quiet interval
	if lines := out.lines(t); len(lines) != 3 || lines[2]["msg"] != "slow CQL statement" {
		t.Fatalf("a slow statement after a quiet interval: %v, want its own line at once", lines)
	}
	l.record(st(2*time.Second), time.Now().Add(time.Hour))
	l.close()
	l.record(st(3*time.Second), time.Now().Add(2*time.Hour))
	if lines := out.lines(t); len(lines) != 4 || lines[3]["slow"] != float64(1) {
		t.Fatalf("closing with one counted: %v, want its summary, and nothing after", lines)
	}
}
