package cql

import (
	"context"
	"fmt"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// Items reads one page of a list with one single-partition query. It asks
// for one item more than the page holds, to learn whether more follow.
func (s *Store) Items(ctx context.Context, l store.List, r store.Range) (store.Page, error) {
	if err := l.Validate(); err != nil {
		return store.Page{}, err
	}
	if err := r.Validate(); err != nil {
		return store.Page{}, err
	}
	lower, upper := "", keys.MaxItemKey
	if r.MinTimestamp > 0 {
		lower = keys.TimestampPrefix(r.MinTimestamp)
	}
	if r.After != "" {
		upper = r.After
	}
	iter := s.session.Query(s.stmt.selectItems, l.Feature.Key(), l.EntityID, lower, upper, r.Limit+1).
		WithContext(ctx).Consistency(s.cfg.ReadConsistency).Idempotent(true).PageSize(r.Limit + 1).Iter()
	page := store.Page{Items: make([]store.Item, 0, min(r.Limit, iter.NumRows()))}
	scanner := iter.Scanner()
	for scanner.Next() {
		if len(page.Items) == r.Limit {
			page.HasMore = true
			break
		}
		var it store.Item
		if err := scanner.Scan(&it.Key, &it.Value); err != nil {
			_ = iter.Close()
			return store.Page{}, classify("reading list items", err)
		}
		it.Timestamp = keys.ItemTimestamp(it.Key)
		page.Items = append(page.Items, it)
	}
	if err := scanner.Err(); err != nil {
		return store.Page{}, classify("reading list items", err)
	}
	return page, nil
}

// AddItems writes the items in one logged batch into the list's partition:
// the server applies all of them or none.
func (s *Store) AddItems(ctx context.Context, l store.List, items []store.NewItem) (store.AddResult, error) {
	writes, expired, err := store.PrepareAdd(l, items, s.now(), s.cap, s.cfg.Limits)
	if err != nil {
		return store.AddResult{}, err
	}
	if len(writes) == 0 {
		return store.AddResult{Expired: expired}, nil
	}
	fk := l.Feature.Key()
	b := s.session.Batch(gocql.LoggedBatch).WithContext(ctx)
	b.SetConsistency(s.cfg.WriteConsistency)
	b.Entries = make([]gocql.BatchEntry, len(writes))
	for i, w := range writes {
		// Re-sending the same rows with the same client timestamp changes
		// nothing, so the batch may be retried.
		b.Entries[i] = gocql.BatchEntry{Stmt: s.stmt.insertItem, Args: []any{fk, l.EntityID, w.Key, w.Value, w.TTL}, Idempotent: true}
	}
	if err := s.session.ExecuteBatch(b); err != nil {
		return store.AddResult{}, classify("adding list items", err)
	}
	return store.AddResult{Added: len(writes), Expired: expired}, nil
}

// removeBatch bounds the item keys of one delete statement.
const removeBatch = 10

// RemoveValue finds the items holding value, by key scan or by index, and
// deletes them, at most ten keys per statement.
func (s *Store) RemoveValue(ctx context.Context, l store.List, value []byte) (int, error) {
	if err := l.Validate(); err != nil {
		return 0, err
	}
	fk := l.Feature.Key()
	var found []string
	var iter *gocql.Iter
	if s.cfg.RemoveStrategy == RemoveByIndex {
		iter = s.session.Query(s.stmt.selectKeysByValue, fk, l.EntityID, value).WithContext(ctx).
			Consistency(s.cfg.ReadConsistency).Idempotent(true).Iter()
	} else {
		iter = s.session.Query(s.stmt.selectItemKeys, fk, l.EntityID).WithContext(ctx).
			Consistency(s.cfg.ReadConsistency).Idempotent(true).Iter()
	}
	hash := keys.ValueHash(value)
	var key string
	for iter.Scan(&key) {
		if keys.HasValueHash(key, hash) {
			found = append(found, key)
		}
	}
	if err := iter.Close(); err != nil {
		return 0, classify("finding items by value", err)
	}
	for start := 0; start < len(found); start += removeBatch {
		chunk := found[start:min(start+removeBatch, len(found))]
		err := s.session.Query(s.stmt.deleteItems, fk, l.EntityID, chunk).WithContext(ctx).
			Consistency(s.cfg.WriteConsistency).Idempotent(true).Exec()
		if err != nil {
			return start, classify(fmt.Sprintf("removing items by value (%d of %d removed)", start, len(found)), err)
		}
	}
	return len(found), nil
}

// RemoveAll deletes the list's partition.
func (s *Store) RemoveAll(ctx context.Context, l store.List) error {
	if err := l.Validate(); err != nil {
		return err
	}
	err := s.session.Query(s.stmt.deleteList, l.Feature.Key(), l.EntityID).WithContext(ctx).
		Consistency(s.cfg.WriteConsistency).Idempotent(true).Exec()
	return classify("removing all list items", err)
}

// ItemTTL reads the TTL the server holds for an item (for tests).
func (s *Store) ItemTTL(ctx context.Context, l store.List, itemKey string) (time.Duration, error) {
	var ttl int
	err := s.session.Query(s.stmt.selectTTL, l.Feature.Key(), l.EntityID, itemKey).WithContext(ctx).
		Consistency(s.cfg.ReadConsistency).Scan(&ttl)
	if err == gocql.ErrNotFound {
		return 0, fmt.Errorf("item %s: %w", itemKey, store.ErrNotFound)
	}
	if err != nil {
		return 0, classify("reading an item's TTL", err)
	}
	return time.Duration(ttl) * time.Second, nil
}
