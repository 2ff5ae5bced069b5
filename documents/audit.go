package documents

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/lexer"
)

// What audit mode logs of a request it lets through is what an operator
// needs to ship the document or refuse it: the operation's name and the
// document's SHA-256, the id a manifest may name it by. Never its text:
// a document's literals are item values and entity ids as often as its
// variables are.

// auditLog bounds audit mode's lines: each document at most once a
// minute, and at most maxAuditedDocuments a minute in all, so that a
// client sending ever new texts cannot flood the log.
// listgate_untrusted_operations_total counts every request.
type auditLog struct {
	mu     sync.Mutex
	minute time.Time       // when the current minute began
	logged map[string]bool // documents logged in it
}

const maxAuditedDocuments = 10

// audit logs a request audit mode let through, unless its document was
// logged this minute or the minute's lines are spent.
func (t *Trusted) audit(ctx context.Context, r Request) {
	doc := documentHash(r)
	if !t.audited.first(doc, time.Now()) {
		return
	}
	t.log.WarnContext(ctx, "an operation enforce mode would refuse was let through (--trusted-documents-mode audit; each document logged at most once a minute)",
		"operation", operationName(r), "document", doc)
}

// first reports whether doc is to be logged at now, and notes it.
func (a *auditLog) first(doc string, now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now.Sub(a.minute) >= time.Minute {
		a.minute, a.logged = now, map[string]bool{}
	}
	if a.logged[doc] || len(a.logged) >= maxAuditedDocuments {
		return false
	}
	a.logged[doc] = true
	return true
}

var sha256Hex = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// documentHash names a request's document by its SHA-256: of the text it
// sends, else the APQ hash it sends alone, when that is one.
func documentHash(r Request) string {
	switch {
	case r.Query != "":
		sum := sha256.Sum256([]byte(r.Query))
		return "sha256:" + hex.EncodeToString(sum[:])
	case sha256Hex.MatchString(r.APQHash):
		return "sha256:" + strings.ToLower(r.APQHash)
	}
	return "unknown (an APQ hash that is not a SHA-256)"
}

var graphqlName = regexp.MustCompile(`^[_A-Za-z][_0-9A-Za-z]*$`)

// operationName is the name of the operation a request runs: its
// operationName, else the first one its text names; "" when it names none
// (or sends, as operationName, something that is no GraphQL name). At
// most 64 bytes, as the request's log line has it.
func operationName(r Request) string {
	name := r.OperationName
	if name == "" {
		name = firstOperationName(r.Query)
	}
	if !graphqlName.MatchString(name) {
		return ""
	}
	return name[:min(len(name), 64)]
}

// firstOperationName is the name of the first named operation of a
// document: the name after query, mutation or subscription outside any
// braces.
func firstOperationName(query string) string {
	lx := lexer.New(&ast.Source{Input: query})
	depth, keyword := 0, false
	for {
		tok, err := lx.ReadToken()
		if err != nil || tok.Kind == lexer.EOF {
			return ""
		}
		switch {
		case tok.Kind == lexer.BraceL:
			depth++
		case tok.Kind == lexer.BraceR:
			depth--
		case keyword && tok.Kind == lexer.Name:
			return tok.Value
		}
		keyword = depth == 0 && tok.Kind == lexer.Name && (tok.Value == "query" || tok.Value == "mutation" || tok.Value == "subscription")
	}
}
