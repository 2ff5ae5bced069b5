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
// time, as its client takes them: each is taken from the watch by the
// goroutine that sends it, when it asks for the next
// (operation.SetProducer), so an idle subscription has no goroutine here.
// An error that ends the watch ends the subscription with it, through its
// operation.
func (r *Resolver) stream(ctx context.Context, w *lists.Watch) <-chan model.ListItem {
	out := make(chan model.ListItem, 1)
	op := operation.From(ctx)
	var last *watch.Delivery // given last: once the next is asked for, it was sent
	ended := false
	op.SetProducer(func() {
		if ended || len(out) > 0 {
			return
		}
		if last != nil {
			w.Sent(*last)
		}
		it, err := w.Next(ctx)
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, watch.ErrEnded) {
				op.EndStream(err)
			}
			ended = true
			close(out)
			return
		}
		out <- model.DeliveredItemOf(w.Feature, &it)
		last = &it
	})
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
