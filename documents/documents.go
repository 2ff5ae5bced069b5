// Package documents holds the trusted documents: the operations a
// gateway's clients ship, read from the manifests their build tools write.
// In enforce mode the gateway runs those only (callers with the scope
// documents:any excepted); in audit mode it runs the others too, and
// counts and logs exactly what enforce mode would refuse. A request names a
// trusted document by its id, by its SHA-256 (APQ's hash), or by sending
// its text.
package documents

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/lexer"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/errkind"
)

// Mode is what the gateway does with an operation that is not trusted.
type Mode string

const (
	Off     Mode = "off"     // runs it: documents are only looked up by id
	Audit   Mode = "audit"   // runs it, and logs and counts it
	Enforce Mode = "enforce" // refuses it
)

// ParseMode reads --trusted-documents-mode.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Off, Audit, Enforce:
		return m, nil
	}
	return "", fmt.Errorf("--trusted-documents-mode %q: want off, audit or enforce", s)
}

// Set is one reading of the manifests: each body by its ids.
type Set struct {
	byID       map[string]string // the manifest's id, "sha256:<hex>" and the bare hex of each body
	normalized map[string]bool   // each body's tokens, one space apart
	files      int
}

// Len is how many documents the set holds.
func (s *Set) Len() int { return len(s.normalized) }

// Load reads a manifest, or every *.json file of a folder: Apollo's
// persisted query manifest, the operations file genqlient's
// export_operations writes, or a Relay-style {"id": "body"} map.
func Load(path string) (*Set, error) {
	files := []string{path}
	if info, err := os.Stat(path); err != nil {
		return nil, err
	} else if info.IsDir() {
		if files, err = filepath.Glob(filepath.Join(path, "*.json")); err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no *.json manifest in the folder", path)
		}
	}
	s := &Set{byID: map[string]string{}, normalized: map[string]bool{}}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		docs, err := parse(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for id, body := range docs {
			if err := s.add(id, body); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
		}
		s.files++
	}
	if s.Len() == 0 {
		return nil, fmt.Errorf("%s: no operations", path)
	}
	return s, nil
}

// parse reads one manifest: its documents by id ("" when it names none).
func parse(b []byte) (map[string]string, error) {
	var probe struct {
		Format     string          `json:"format"`
		Version    int             `json:"version"`
		Operations json.RawMessage `json:"operations"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	docs := map[string]string{}
	switch {
	case probe.Format == "apollo-persisted-query-manifest":
		if probe.Version != 1 {
			return nil, fmt.Errorf("Apollo persisted query manifest version %d: only version 1 is known", probe.Version)
		}
		var ops []struct{ ID, Body, Name, Type string }
		if err := json.Unmarshal(probe.Operations, &ops); err != nil {
			return nil, fmt.Errorf("operations: %w", err)
		}
		for i, op := range ops {
			if op.ID == "" || op.Body == "" {
				return nil, fmt.Errorf("operation %d (%s): no id or body", i+1, op.Name)
			}
			if prev, ok := docs[op.ID]; ok && prev != op.Body {
				return nil, fmt.Errorf("operation %d (%s): id %s names two documents", i+1, op.Name, op.ID)
			}
			docs[op.ID] = op.Body
		}
	case probe.Format != "":
		return nil, fmt.Errorf("unknown manifest format %q (known: apollo-persisted-query-manifest, genqlient's export_operations, {\"id\": \"body\"})", probe.Format)
	case len(probe.Operations) > 0 && probe.Operations[0] == '[':
		var ops []struct {
			OperationName string `json:"operationName"`
			Query         string `json:"query"`
		}
		if err := json.Unmarshal(probe.Operations, &ops); err != nil {
			return nil, fmt.Errorf("operations: %w", err)
		}
		for i, op := range ops {
			if op.Query == "" {
				return nil, fmt.Errorf("operation %d (%s): no query", i+1, op.OperationName)
			}
			docs[hashID(op.Query)] = op.Query
		}
	default:
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("neither an Apollo manifest, genqlient's operations, nor a map of ids to bodies: %w", err)
		}
		for id, body := range m {
			if body == "" {
				return nil, fmt.Errorf("document %q: no body", id)
			}
			docs[id] = body
		}
	}
	return docs, nil
}

func (s *Set) add(id, body string) error {
	n, err := normalize(body)
	if err != nil {
		return fmt.Errorf("document %s: %w", id, err)
	}
	sum := sha256.Sum256([]byte(body))
	hexSum := hex.EncodeToString(sum[:])
	for _, key := range []string{id, "sha256:" + hexSum, hexSum} {
		if prev, ok := s.byID[key]; ok && prev != body {
			return fmt.Errorf("id %s names two documents", key)
		}
		s.byID[key] = body
	}
	s.normalized[n] = true
	return nil
}

func hashID(body string) string {
	sum := sha256.Sum256([]byte(body))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// normalize is a document's tokens one space apart: two texts that differ
// in white space, commas and comments are one document.
func normalize(body string) (string, error) {
	lx := lexer.New(&ast.Source{Input: body})
	var b strings.Builder
	for {
		tok, err := lx.ReadToken()
		if err != nil {
			return "", err
		}
		if tok.Kind == lexer.EOF {
			return b.String(), nil
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		switch tok.Kind {
		case lexer.String, lexer.BlockString:
			q, _ := json.Marshal(tok.Value)
			b.Write(q)
		default:
			b.WriteString(tok.Value)
		}
	}
}

// Trusted is the gateway's trusted documents: read at start, and again on
// SIGHUP or when the file changes; a reading that fails keeps the set in
// use, and is logged and counted.
type Trusted struct {
	path string
	mode Mode
	set  atomic.Pointer[Set]
	log  *slog.Logger

	reloads, untrusted metric.Int64Counter
	audited            auditLog
}

// New reads the documents at path (none: mode is Off and no document is
// known).
func New(path string, mode Mode, log *slog.Logger, meter metric.Meter) (*Trusted, error) {
	t := &Trusted{path: path, mode: mode, log: log}
	if path == "" {
		t.mode = Off
	}
	var err error
	if t.reloads, err = meter.Int64Counter("listgate.trusted_documents.reloads",
		metric.WithDescription("Readings of --trusted-documents, by outcome: ok, or failed (the set in use is kept).")); err != nil {
		return nil, err
	}
	if t.untrusted, err = meter.Int64Counter("listgate.untrusted_operations",
		metric.WithDescription("Requests enforce mode refuses, by mode: audit (let through) or enforce (refused).")); err != nil {
		return nil, err
	}
	// At zero from the start, each outcome and mode, with trusted
	// documents on or off: a dashboard shows 0, not "No data".
	for _, outcome := range []string{"ok", "failed"} {
		t.reloads.Add(context.Background(), 0, metric.WithAttributes(attribute.String("outcome", outcome)))
	}
	for _, m := range []Mode{Audit, Enforce} {
		t.untrusted.Add(context.Background(), 0, metric.WithAttributes(attribute.String("mode", string(m))))
	}
	if _, err = meter.Int64ObservableGauge("listgate.trusted_documents",
		metric.WithDescription("Trusted documents in the set in use."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			n := 0
			if s := t.set.Load(); s != nil {
				n = s.Len()
			}
			o.Observe(int64(n))
			return nil
		})); err != nil {
		return nil, err
	}
	if path != "" {
		s, err := Load(path)
		if err != nil {
			return nil, fmt.Errorf("--trusted-documents: %w", err)
		}
		t.set.Store(s)
	}
	return t, nil
}

// Reload reads the documents again; on failure the set in use stays.
func (t *Trusted) Reload(ctx context.Context) error {
	s, err := Load(t.path)
	if err != nil {
		t.reloads.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "failed")))
		t.log.Error("reading the trusted documents failed; the documents read before stay in use", "path", t.path, "err", err)
		return err
	}
	t.set.Store(s)
	t.reloads.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", "ok")))
	t.log.Info("trusted documents read", "path", t.path, "documents", s.Len(), "files", s.files)
	return nil
}

// Run reads the documents again on SIGHUP, and when a file of the path
// changes (checked every interval), until ctx ends.
func (t *Trusted) Run(ctx context.Context, interval time.Duration) {
	if t.path == "" {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	seen := t.stamp()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		case <-tick.C:
			if now := t.stamp(); now == seen {
				continue
			}
		}
		seen = t.stamp()
		t.Reload(ctx)
	}
}

// stamp is the names, sizes and times of the path's files: what a change
// changes.
func (t *Trusted) stamp() string {
	files := []string{t.path}
	if info, err := os.Stat(t.path); err == nil && info.IsDir() {
		files, _ = filepath.Glob(filepath.Join(t.path, "*.json"))
	}
	var b bytes.Buffer
	for _, f := range files {
		if info, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%s %d %d;", f, info.Size(), info.ModTime().UnixNano())
		}
	}
	return b.String()
}

// The errors of an operation refused for not being trusted.
var (
	ErrNotInList     = errors.New("not in the trusted documents")
	ErrNotSafelisted = errors.New("not a trusted document")
)

// Request is what a request says of its document.
type Request struct {
	DocumentID    string // a top-level documentId
	APQHash       string // extensions.persistedQuery.sha256Hash
	Query         string // its text
	OperationName string // its operationName
	AnyAllowed    bool   // its caller has the scope documents:any
}

// Resolve gives the text of a request's document: the trusted document it
// names by id or hash, or its own text. What enforce mode refuses is
// decided once (judge); audit mode counts exactly that, logs it without
// its text (audit.go), and runs it. An id not in the set is ErrNotInList
// in every mode: there is no text to run. A hash not in the set with no
// text is left to automatic persisted queries (found false) unless
// enforced.
func (t *Trusted) Resolve(ctx context.Context, r Request) (query string, found bool, err error) {
	s := t.set.Load()
	if r.DocumentID != "" {
		return t.byDocumentID(ctx, s, r)
	}
	v := s.judge(r)
	if v.refused && t.mode != Off && !r.AnyAllowed {
		t.count(ctx)
		if t.mode == Enforce {
			return "", false, v.refusal()
		}
		t.audit(ctx, r)
	}
	switch {
	case v.body != "":
		return v.body, true, nil
	case r.Query == "":
		return "", false, nil // a hash alone: automatic persisted queries may know it
	}
	return r.Query, true, nil
}

// byDocumentID gives the trusted document a request names by its id.
func (t *Trusted) byDocumentID(ctx context.Context, s *Set, r Request) (string, bool, error) {
	if body, ok := s.lookup(r.DocumentID); ok {
		if r.Query != "" && r.Query != body {
			return "", false, fmt.Errorf("%w: the request sends both a documentId and a query, and they differ: send one", errkind.Malformed)
		}
		return body, true, nil
	}
	t.count(ctx)
	return "", false, fmt.Errorf("%w documentId %s: it is %w (--trusted-documents)", errkind.Invalid, errkind.Quote(r.DocumentID), ErrNotInList)
}

// verdict is what the set says of a request that names no documentId.
type verdict struct {
	body    string // the trusted document its APQ hash names, agreeing with its text; "": none
	refused bool   // enforce mode refuses it: refusal says why
	hash    string // the APQ hash it was refused for; "": its text was
}

// refusal is why enforce mode refuses a request, built only when some mode
// uses it: with trusted documents off, every request is judged untrusted.
func (v verdict) refusal() error {
	if v.hash != "" {
		return fmt.Errorf("%w persisted query %s: it is %w (--trusted-documents)", errkind.Invalid, errkind.Clip(v.hash), ErrNotInList)
	}
	return fmt.Errorf("%w operation: it is %w: this gateway runs the operations its clients ship (--trusted-documents); send one by its documentId, or ask for the scope documents:any", errkind.Invalid, ErrNotSafelisted)
}

// judge decides whether a request is trusted: its APQ hash names a trusted
// document (and its text, if it sends one, is that document), or, with no
// hash, its text is a trusted document. A hash not in the set is refused
// whatever text comes with it: enforce runs what the manifests hold, and
// the text of an APQ registration is what the hash would later name.
func (s *Set) judge(r Request) verdict {
	if r.APQHash != "" {
		if body, ok := s.lookup(r.APQHash); ok && (r.Query == "" || r.Query == body) {
			return verdict{body: body}
		}
		return verdict{refused: true, hash: r.APQHash}
	}
	return verdict{refused: !s.trusted(r.Query)}
}

// lookup gives the body of the document id names; a nil set has none.
func (s *Set) lookup(id string) (string, bool) {
	if s == nil {
		return "", false
	}
	body, ok := s.byID[id]
	return body, ok
}

// trusted reports whether query is a trusted document's text, byte for
// byte or in other white space; a nil set trusts none.
func (s *Set) trusted(query string) bool {
	if s == nil {
		return false
	}
	sum := sha256.Sum256([]byte(query))
	if _, ok := s.byID[hex.EncodeToString(sum[:])]; ok {
		return true
	}
	n, err := normalize(query)
	return err == nil && s.normalized[n]
}

// count counts a request enforce mode refuses (or, in audit mode, would
// have); off mode audits nothing.
func (t *Trusted) count(ctx context.Context) {
	if t.mode == Off {
		return
	}
	t.untrusted.Add(ctx, 1, metric.WithAttributes(attribute.String("mode", string(t.mode))))
}

// Mode is the mode in force.
func (t *Trusted) Mode() Mode { return t.mode }
