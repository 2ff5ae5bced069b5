// Package graph is the GraphQL schema's resolvers: each hands its field to
// the lists service in one call and turns the answer into model types.
// They neither authorize, validate nor choose a limit: the guards did, and
// the service does. The executable schema is generated into graph/exec;
// package endpoint serves it.
package graph

import (
	"context"
	"errors"

	"github.com/listgate/listgate/graph/model"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/operation"
	"github.com/listgate/listgate/watch"
)

// Resolver is the root resolver.
type Resolver struct {
	lists *lists.Service
}

// NewResolver returns the root resolver over the lists service.
func NewResolver(svc *lists.Service) *Resolver { return &Resolver{lists: svc} }

// stream turns a watch into the items a subscription sends, one at a
// time, as its client takes them; an error that ends the watch ends the
// subscription with it, through its operation.
func (r *Resolver) stream(ctx context.Context, w *lists.Watch) <-chan model.ListItem {
	out := make(chan model.ListItem)
	go func() {
		defer close(out)
		for {
			it, err := w.Next(ctx)
			if err != nil {
				if op := operation.From(ctx); op != nil && ctx.Err() == nil && !errors.Is(err, watch.ErrEnded) {
					op.EndStream(err)
				}
				return
			}
			select {
			case out <- model.DeliveredItemOf(w.Feature, &it):
				w.Sent(it)
			case <-w.Done():
				// Ended while its client was not reading: the item is not
				// sent, the next call says why (and where to resume: before
				// it), and what it held is let go.
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
