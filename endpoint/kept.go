package endpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"weak"

	"github.com/99designs/gqlgen/graphql"
	"github.com/hashicorp/golang-lru/v2/simplelru"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/pool"
)

// A subscription keeps its operation for as long as it lasts: what runs
// it, not the text it arrived as. A document gqlparser parsed holds all of
// its text: every node's position points to it, every name and value is a
// substring of it (the operation's name, which its log line and metrics
// carry, too), and its comments are parsed as well; gqlgen's operation
// context holds the text itself and the request's extensions. A
// subscription runs a copy of what runs (the operation, the fragments it
// spreads, the coerced variables) in nodes of their own, with no comments
// and positions without the text (keeper.go), and the copy's size holds
// room in its caller's share of --subscription-operation-bytes for as long
// as the subscription lasts. The subscribe message and its decoded
// payload are gone once the subscription is set up.

// keep takes room for the n bytes a subscription keeps of its operation
// in its caller's share of --subscription-operation-bytes, or says why it
// cannot: a caller past its share is throttled, and another caller still
// finds room.
func (s *sockets) keep(ctx context.Context, caller string, n int64) (*pool.Hold, error) {
	hold, err := s.kept.Take(caller, n)
	switch {
	case errors.Is(err, pool.ErrFull):
		s.refused.Add(ctx, 1, refusedOperationBytes)
		return nil, fmt.Errorf("%w: the subscriptions open on this gateway keep their limit of %d bytes of their operations (--subscription-operation-bytes); retry, or subscribe with a smaller operation", errkind.Refused, s.kept.Size())
	case errors.Is(err, pool.ErrShare):
		s.refused.Add(ctx, 1, refusedOperationShare)
		s.h.callers.Shared(ctx, caller)
		return nil, fmt.Errorf("%w: this caller's subscriptions would keep more than their share of the bytes of their operations (%d, --caller-subscription-operation-bytes-share of --subscription-operation-bytes; less while other callers keep the rest), with this one's %d: end one, or subscribe with a smaller operation", errkind.Throttled, s.kept.Share(), n)
	}
	return hold, err
}

// keptDocuments are the copies subscriptions run, by the operation they
// copy: the subscriptions of one text share its parsed document through
// the query cache, and so share one copy, as they shared the document
// (each still counts its size). An entry keeps neither the document (the
// key is weak: the query cache lets it go) nor the copy (its subscriptions
// hold it).
type keptDocuments struct {
	mu  sync.Mutex
	lru *simplelru.LRU[weak.Pointer[ast.OperationDefinition], keptDocument] // guarded by mu
}

type keptDocument struct {
	doc  weak.Pointer[ast.QueryDocument]
	size int64
}

func newKeptDocuments(n int) *keptDocuments {
	lru, _ := simplelru.NewLRU[weak.Pointer[ast.OperationDefinition], keptDocument](n, nil)
	return &keptDocuments{lru: lru}
}

// kept returns what a subscription keeps of rc, and about how many bytes
// that holds: its operation (shared with the subscriptions of the same
// document) and its variables (its own). rc and its document are only
// read: a document from the parsed-query cache is shared.
func (k *keptDocuments) kept(rc *graphql.OperationContext) (*graphql.OperationContext, int64) {
	doc, size := k.of(rc.Doc, rc.Operation)
	vars, varsSize := copyVariables(rc.Variables)
	op := doc.Operations[0]
	return &graphql.OperationContext{
		Variables:              vars,
		OperationName:          op.Name,
		Doc:                    doc,
		Operation:              op,
		DisableIntrospection:   rc.DisableIntrospection,
		RecoverFunc:            rc.RecoverFunc,
		ResolverMiddleware:     rc.ResolverMiddleware,
		RootResolverMiddleware: rc.RootResolverMiddleware,
		Stats:                  rc.Stats,
	}, size + varsSize
}

// of is the copy of op, of doc, that subscriptions run, made for the first
// of them, and about the bytes it holds; its one operation is op's.
func (k *keptDocuments) of(doc *ast.QueryDocument, op *ast.OperationDefinition) (*ast.QueryDocument, int64) {
	key := weak.Make(op)
	k.mu.Lock()
	e, _ := k.lru.Get(key)
	k.mu.Unlock()
	if c := e.doc.Value(); c != nil {
		return c, e.size
	}
	c, size := copyDocument(doc, op)
	k.mu.Lock()
	k.lru.Add(key, keptDocument{weak.Make(c), size})
	k.mu.Unlock()
	return c, size
}
