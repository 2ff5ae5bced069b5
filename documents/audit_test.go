package documents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
)

// Audit mode's line names the operation and the document's SHA-256, never
// its text; each document once a minute, and at most 10 documents a
// minute in all.
func TestAuditLogsTheNameAndHashAlone(t *testing.T) {
	path := write(t, t.TempDir(), "m.json", `{"read-1": "`+jsonEscape(read)+`"}`)
	var log bytes.Buffer
	audit, err := New(path, Audit, slog.New(slog.NewJSONHandler(&log, nil)), metricnoop.NewMeterProvider().Meter(""))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const (
		named     = `fragment F on Query { listFeatures { key } } query Named { ...F entity(type: "user", entityId: "secret-1") { id } }`
		anonymous = `{ entity(type: "user", entityId: "secret-2") { id } }`
		chosen    = `query A { a } query B { entity(type: "user", entityId: "secret-3") { id } }`
		badName   = `query { entity(type: "user", entityId: "secret-4") { id } }`
	)
	for _, r := range []Request{
		{Query: named},
		{Query: named}, // logged once a minute
		{Query: anonymous},
		{Query: chosen, OperationName: "B"},
		{Query: badName, OperationName: "secret-5 is no name"},
		{APQHash: sum(count)},
		{APQHash: "secret-6"},
	} {
		audit.Resolve(ctx, r)
	}
	var got []string
	for line := range strings.SplitSeq(strings.TrimSpace(log.String()), "\n") {
		if strings.Contains(line, "secret-") {
			t.Errorf("logged a request's text: %s", line)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%v %v", m["operation"], m["document"]))
	}
	want := []string{
		"Named sha256:" + sum(named),
		" sha256:" + sum(anonymous),
		"B sha256:" + sum(chosen),
		" sha256:" + sum(badName),
		" sha256:" + sum(count),
		" unknown (an APQ hash that is not a SHA-256)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged (operation document):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	var a auditLog
	now := time.Now()
	for i := range 12 {
		if logged := a.first(fmt.Sprint(i), now); logged != (i < maxAuditedDocuments) {
			t.Errorf("document %d of a minute logged: %v", i, logged)
		}
	}
	if !a.first("0", now.Add(time.Minute)) {
		t.Error("a document not logged again a minute later")
	}
}
