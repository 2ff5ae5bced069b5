package lists

import (
	"context"
	"errors"
	"fmt"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
	"github.com/listgate/listgate/values"
)

// Add adds items to a list, all or nothing.
func (s *Service) Add(ctx context.Context, ref Ref, items []NewItem) (store.AddResult, error) {
	l, add, err := s.prepare(ctx, ref, items, checking(ctx))
	if err != nil || checking(ctx) {
		return store.AddResult{}, err
	}
	return s.store.AddItems(ctx, l, add)
}

// ListAdd is the add of one list in a batch.
type ListAdd struct {
	Ref
	Items []NewItem
}

// BatchResult is what one list's add of a batch did, or why it failed.
type BatchResult struct {
	store.AddResult
	Err error
}

// AddBatch adds items to many lists: at most MaxBatchLists lists and
// MaxAddItems items in all. Every add is checked before any is written,
// so input that can never succeed writes nothing; then each list's add is
// written as its own atomic batch, at most LoaderConfig.Concurrency at
// once, and one that fails (its partition's replicas time out, say) fails
// alone, in its result.
func (s *Service) AddBatch(ctx context.Context, adds []ListAdd) ([]BatchResult, error) {
	total := 0
	for _, a := range adds {
		total += len(a.Items)
	}
	if err := s.CheckBatch(len(adds), total); err != nil {
		return nil, err
	}
	type write struct {
		l     store.List
		items []store.NewItem
	}
	writes := make([]write, len(adds))
	for i, a := range adds {
		l, items, err := s.prepare(ctx, a.Ref, a.Items, true)
		if err != nil {
			return nil, fmt.Errorf("adds[%d]: %w", i, err)
		}
		writes[i] = write{l, items}
	}
	if checking(ctx) {
		return nil, nil
	}
	results := make([]BatchResult, len(writes))
	s.workers.each(len(writes), s.loader.cfg.Concurrency, func(i int) {
		// On a worker, a panic would end the process: it fails its list.
		defer func() {
			if p := recover(); p != nil {
				results[i] = BatchResult{Err: s.loader.onPanic(ctx, p)}
			}
		}()
		res, err := s.store.AddItems(ctx, writes[i].l, writes[i].items)
		results[i] = BatchResult{AddResult: res, Err: err}
	})
	return results, nil
}

// prepare turns an add into the list and items to write. With check, it
// also checks what the store checks before it writes (ids, limits,
// timestamps, TTLs), so that an add bound to fail fails before anything
// is written.
func (s *Service) prepare(ctx context.Context, ref Ref, items []NewItem, check bool) (store.List, []store.NewItem, error) {
	l, err := s.list(ctx, ref)
	if err != nil {
		return store.List{}, nil, err
	}
	now := s.now()
	add := make([]store.NewItem, len(items))
	for i, it := range items {
		v, err := values.Encode(l.Feature.ValueType, it.Value.Raw)
		if err != nil {
			return store.List{}, nil, fmt.Errorf("items[%d]: %w", i, err)
		}
		add[i] = store.NewItem{Timestamp: now.UnixNano(), Value: v}
		if it.Timestamp != nil {
			add[i].Timestamp = *it.Timestamp
		}
	}
	if check {
		if _, _, err := store.PrepareAdd(l, add, now, s.store.ExpiryCap(), s.store.Limits()); err != nil {
			return store.List{}, nil, err
		}
	}
	return l, add, nil
}

// RemoveValues removes every item of a list in a window holding one of
// the values and returns how many there were. It looks at MaxCount rows at
// most: past them it removes nothing and says how to narrow the window;
// one that ends before it removed every item (past its deadline, say)
// says how many it removed, and to call again for the rest.
func (s *Service) RemoveValues(ctx context.Context, ref Ref, vs []values.Value, w Window) (int, error) {
	l, err := s.list(ctx, ref)
	if err != nil {
		return 0, err
	}
	encoded, err := s.encodeValues(l.Feature, vs)
	if err != nil || checking(ctx) {
		return 0, err
	}
	sw, empty := w.store()
	if empty {
		return 0, nil
	}
	n, err := s.store.RemoveValues(ctx, l, encoded, sw, s.limits.MaxCount)
	var cut *store.Removal
	switch {
	case errors.Is(err, store.ErrTooManyRows):
		return 0, fmt.Errorf("%w removal from %s/%s: the list holds more than %d items in the window, more than one removal may look at (--max-count); nothing was removed: remove from a narrower window (minTimestamp, maxTimestamp), one after another", errkind.Invalid, l.Feature.Key(), l.EntityID, s.limits.MaxCount)
	case errors.As(err, &cut):
		done := fmt.Sprintf("removal from %s/%s: %d of the at most %d items holding the values were removed", l.Feature.Key(), l.EntityID, cut.Removed, cut.Matched)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return n, fmt.Errorf("%w: %s before the request's deadline (--request-timeout); call it again to remove the rest", errkind.Timeout, done)
		}
		return n, fmt.Errorf("%w: %s before the list store failed; call it again to remove the rest", errkind.Refused, done)
	}
	return n, err
}

// RemoveAll empties a list.
func (s *Service) RemoveAll(ctx context.Context, ref Ref) error {
	l, err := s.list(ctx, ref)
	if err != nil || checking(ctx) {
		return err
	}
	return s.store.RemoveAll(ctx, l)
}

// list resolves a list reference to its feature, to write to. The store
// checks the entity id before it writes; a check run checks it here.
func (s *Service) list(ctx context.Context, ref Ref) (store.List, error) {
	if err := s.catalog.Fresh(); err != nil {
		return store.List{}, err
	}
	f, err := s.feature(ctx, ref.EntityType, ref.Feature, ref.Version)
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

// feature looks a feature up in the catalog; while a mutation operation is
// checked, features that an earlier field of it creates count too.
func (s *Service) feature(ctx context.Context, entityType, name, version string) (*store.Feature, error) {
	if c := checkFrom(ctx); c != nil {
		key := keys.FeatureKey(entityType, name, version)
		if f, ok := c.created[key]; ok {
			return f, nil
		}
		if c.deleted[key] {
			return nil, fmt.Errorf("feature %s: %w: an earlier field of this operation deletes it", key, errkind.NotFound)
		}
	}
	return s.catalog.Feature(ctx, entityType, name, version)
}
