// Package graph is the GraphQL schema's resolvers: each hands its field to
// the lists service in one call and turns the answer into model types.
// They neither authorize, validate nor choose a limit: the guards did, and
// the service does. The executable schema is generated into graph/exec;
// package endpoint serves it.
package graph

import (
	"context"

	"github.com/listgate/listgate/graph/model"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/operation"
)

// Resolver is the root resolver.
type Resolver struct {
	lists *lists.Service
}

// NewResolver returns the root resolver over the lists service.
func NewResolver(svc *lists.Service) *Resolver { return &Resolver{lists: svc} }

// stream turns a watch into the items a subscription sends; an error that
// ends the watch ends the subscription with it, through its operation.
func (r *Resolver) stream(ctx context.Context, w *lists.Watch) <-chan model.ListItem {
	out := make(chan model.ListItem)
	go func() {
		defer close(out)
		for it := range w.Items {
			select {
			case out <- model.ItemOf(w.Feature, &it):
			case <-ctx.Done():
				return
			}
		}
		if err := w.Err(); err != nil {
			if op := operation.From(ctx); op != nil {
				op.EndStream(err)
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
