package graph

import (
	"fmt"
	"time"

	"github.com/listgate/listgate/graph/model"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/values"
)

// listRange checks a list's paging arguments against the limits.
func (r *Resolver) listRange(minTimestamp *model.Time, limit *int, after *string) (store.Range, error) {
	rg := store.Range{Limit: 100}
	if limit != nil {
		rg.Limit = *limit
	}
	if rg.Limit < 1 || rg.Limit > r.limits.MaxListLimit {
		return rg, fmt.Errorf("%w limit %d: must be from 1 to %d", store.ErrInvalid, rg.Limit, r.limits.MaxListLimit)
	}
	if minTimestamp != nil {
		rg.MinTimestamp = max(int64(*minTimestamp), 0)
	}
	if after != nil {
		rg.After = *after // the store checks it is an item key, before any read
	}
	return rg, nil
}

// listPage maps a store page to its GraphQL form.
func listPage(f *store.Feature, p store.Page) (*model.ListPage, error) {
	out := &model.ListPage{Items: make([]model.ListItem, len(p.Items)), HasMore: p.HasMore}
	ttl := int64(f.TTL)
	for i, it := range p.Items {
		if err := values.Check(f.ValueType, it.Value); err != nil {
			return nil, fmt.Errorf("list of %s, item %s: %w", f.Key(), it.Key, err)
		}
		out.Items[i] = model.ListItem{
			Value:     values.Value{Type: f.ValueType, Bytes: it.Value},
			Timestamp: model.Time(it.Timestamp),
			ExpiresAt: model.Time(it.Timestamp + ttl),
			Cursor:    it.Key,
		}
	}
	if n := len(p.Items); n > 0 {
		out.EndCursor = &p.Items[n-1].Key
	}
	return out, nil
}

func listFeature(f *store.Feature) model.ListFeature {
	out := model.ListFeature{
		Key: f.Key(), EntityType: f.EntityType, Name: f.Name, Version: f.Version,
		ValueType: f.ValueType, TTLSeconds: int(f.TTL / time.Second), CreatedAt: model.TimeOf(f.CreatedAt),
	}
	if f.Description != "" {
		out.Description = &f.Description
	}
	return out
}

// list resolves a list reference to its feature (from the catalog); the
// store checks the entity id, before anything is written.
func (r *Resolver) list(ref model.ListRefInput) (store.List, error) {
	f, err := r.catalog.Feature(ref.EntityType, ref.Feature, deref(ref.Version))
	if err != nil {
		return store.List{}, err
	}
	return store.List{Feature: f, EntityID: ref.EntityID}, nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
