package graph

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/graph/model"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
	"github.com/listgate/listgate/values"
)

// listRange checks a list's paging arguments against the limits.
func (r *Resolver) listRange(minTimestamp *model.Time, limit *int32, after *string) (store.Range, error) {
	rg := store.Range{Limit: 100}
	if limit != nil {
		rg.Limit = int(*limit)
	}
	if rg.Limit < 1 || rg.Limit > r.limits.MaxListLimit {
		return rg, fmt.Errorf("%w limit %d: must be from 1 to %d", errkind.Invalid, rg.Limit, r.limits.MaxListLimit)
	}
	if minTimestamp != nil {
		rg.MinTimestamp = max(int64(*minTimestamp), 0)
	}
	if after != nil {
		rg.After = *after // the store checks it is an item key, before any read
	}
	return rg, nil
}

// page reads a page of one entity's list: through the request's loader for
// Entity.list, where a request may read many lists, batched and each read
// once; directly for listItems, where handing the read to the loader's
// goroutine doubled the CPU of a one-item request (BenchmarkListItems).
func (r *Resolver) page(ctx context.Context, entityType, entityID, feature, version string, minTimestamp *model.Time, limit *int32, after *string, batched bool) (*model.ListPage, error) {
	f, err := r.catalog.Feature(ctx, entityType, feature, version)
	if err != nil {
		return nil, err
	}
	rg, err := r.listRange(minTimestamp, limit, after)
	if err != nil {
		return nil, err
	}
	if batched {
		p, err := listLoaderFor(ctx).Load(ctx, listKey{feature: f, entityID: entityID, r: rg})()
		if err != nil {
			return nil, err
		}
		return r.listPage(ctx, f, p)
	}
	req := requestFrom(ctx)
	if req == nil {
		p, err := r.store.Items(ctx, store.List{Feature: f, EntityID: entityID}, rg)
		if err != nil {
			return nil, err
		}
		return r.listPage(ctx, f, p)
	}
	// A request's direct reads (listItems under aliases) run one at a time,
	// each after the bytes of the ones before it are charged, so that a
	// request holds at most --max-response-bytes and one page, not every
	// page at once. One listItems, the common case, never waits.
	req.directReads.Lock()
	defer req.directReads.Unlock()
	if req.responseBytes.Load() > int64(r.limits.MaxResponseBytes) {
		return nil, tooLarge(f, r.limits.MaxResponseBytes) // full already: read nothing more
	}
	p, err := r.store.Items(ctx, store.List{Feature: f, EntityID: entityID}, rg)
	if err != nil {
		return nil, err
	}
	return r.listPage(ctx, f, p)
}

// listPage maps a store page to its GraphQL form, charging its bytes to the
// request's response: each field that shows a page is charged, aliases of
// one page too, since each writes its own copy.
func (r *Resolver) listPage(ctx context.Context, f *store.Feature, p store.Page) (*model.ListPage, error) {
	size := 0
	for _, it := range p.Items {
		size += itemBytes + len(it.Key) + len(it.Value)
	}
	if f.ValueType == store.Bytes {
		size += size / 3 // base64
	}
	if req := requestFrom(ctx); req != nil && req.responseBytes.Add(int64(size)) > int64(r.limits.MaxResponseBytes) {
		return nil, tooLarge(f, r.limits.MaxResponseBytes)
	}
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

func tooLarge(f *store.Feature, limit int) error {
	return fmt.Errorf("%w list of %s: the response would carry more than %d bytes of list items (--max-response-bytes); ask for fewer items or lists", errkind.Invalid, f.Key(), limit)
}

// itemBytes is what an item adds to a response beyond its key and value:
// field names, timestamps, quotes.
const itemBytes = 96

func listFeature(f *store.Feature) *model.ListFeature {
	out := &model.ListFeature{
		Key: f.Key(), EntityType: f.EntityType, Name: f.Name, Version: f.Version,
		ValueType: f.ValueType, TTLSeconds: int32(f.TTL / time.Second), CreatedAt: model.TimeOf(f.CreatedAt),
	}
	if f.Description != "" {
		out.Description = &f.Description
	}
	return out
}

// feature looks a feature up in the catalog; while a mutation operation is
// checked, features that an earlier field of it creates count too.
func (r *Resolver) feature(ctx context.Context, entityType, name, version string) (*store.Feature, error) {
	f, err := r.catalog.Feature(ctx, entityType, name, version)
	if errors.Is(err, errkind.NotFound) {
		if c := checkFrom(ctx); c != nil {
			if f, ok := c.created[keys.FeatureKey(entityType, name, version)]; ok {
				return f, nil
			}
		}
	}
	return f, err
}

// list resolves a list reference to its feature, to write to. The store
// checks the entity id before it writes; a check run checks it here.
func (r *Resolver) list(ctx context.Context, ref model.ListRefInput) (store.List, error) {
	if err := r.catalog.Fresh(); err != nil {
		return store.List{}, err
	}
	f, err := r.feature(ctx, ref.EntityType, ref.Feature, deref(ref.Version))
	if err != nil {
		return store.List{}, err
	}
	l := store.List{Feature: f, EntityID: ref.EntityID}
	if checking(ctx) {
		if err := l.Validate(); err != nil {
			return store.List{}, err
		}
	}
	return l, nil
}

// addition turns an addListItems call into the list and items to write.
func (r *Resolver) addition(ctx context.Context, ref model.ListRefInput, items []model.ListItemInput) (store.List, []store.NewItem, error) {
	l, err := r.list(ctx, ref)
	if err != nil {
		return store.List{}, nil, err
	}
	now := r.now()
	add := make([]store.NewItem, len(items))
	for i, it := range items {
		v, err := values.Encode(l.Feature.ValueType, it.Value.Raw)
		if err != nil {
			return store.List{}, nil, fmt.Errorf("items[%d]: %w", i, err)
		}
		add[i] = store.NewItem{Timestamp: now.UnixNano(), Value: v}
		if it.Timestamp != nil {
			add[i].Timestamp = int64(*it.Timestamp)
		}
	}
	if checking(ctx) {
		// What the store checks before it writes (limits, timestamps,
		// TTLs), so that an add bound to fail fails the whole operation.
		if _, _, err := store.PrepareAdd(l, add, now, r.store.ExpiryCap(), r.store.Limits()); err != nil {
			return store.List{}, nil, err
		}
	}
	return l, add, nil
}

// newFeature turns createListFeature's input into the feature to create.
func (r *Resolver) newFeature(ctx context.Context, in model.CreateListFeatureInput) (store.Feature, error) {
	f := store.Feature{
		EntityType: in.EntityType, Name: in.Name, Version: deref(in.Version), ValueType: in.ValueType,
		TTL: time.Duration(in.TTLSeconds) * time.Second, Description: deref(in.Description),
	}
	c := checkFrom(ctx)
	if c == nil {
		return f, nil // the catalog checks it
	}
	if err := f.Validate(r.now(), r.store.ExpiryCap()); err != nil {
		return f, err
	}
	if _, err := r.feature(ctx, f.EntityType, f.Name, f.Version); err == nil {
		return f, store.FeatureExists(f.Key())
	}
	c.created[f.Key()] = &f
	return f, nil
}

// checkVersion checks createListFeatureVersion's arguments against the
// catalog (and the features created before it in the operation).
func (r *Resolver) checkVersion(ctx context.Context, entityType, name, version string, ttl *time.Duration, description *string) error {
	c := checkFrom(ctx)
	var base *store.Feature
	for _, f := range r.catalog.List(entityType) {
		if f.Name == name {
			base = f
		}
	}
	for _, f := range c.created {
		if f.EntityType == entityType && f.Name == name {
			base = f
		}
	}
	if base == nil {
		if err := keys.ValidateFeature(entityType, name, version); err != nil {
			return err
		}
		return fmt.Errorf("feature %s#%s: %w: create it with createListFeature first", entityType, name, errkind.NotFound)
	}
	v := *base
	v.Version = version
	if ttl != nil {
		v.TTL = *ttl
	}
	if description != nil {
		v.Description = *description
	}
	if err := v.Validate(r.now(), r.store.ExpiryCap()); err != nil {
		return err
	}
	if _, err := r.feature(ctx, entityType, name, version); err == nil {
		return store.FeatureExists(v.Key())
	}
	c.created[v.Key()] = &v
	return nil
}

func ttlOf(seconds *int32) *time.Duration {
	if seconds == nil {
		return nil
	}
	d := time.Duration(*seconds) * time.Second
	return &d
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
