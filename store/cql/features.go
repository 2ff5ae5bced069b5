package cql

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// CreateFeature inserts the feature if its row does not exist, or creates
// a deleted one again over its row; both are lightweight transactions, so
// two gateways cannot both succeed. One created again records from when
// its items count (ItemsSince, a write timestamp of this process's clock
// taken now): the deleted feature's rows, written before, are never shown.
// Like every lightweight transaction here they carry no timestamp of the
// store's: the server writes them at their Paxos ballot's (Cassandra
// refuses USING TIMESTAMP with IF and ignores the driver's default
// timestamp).
func (s *Store) CreateFeature(ctx context.Context, f store.Feature) (store.Feature, error) {
	now := s.now()
	if err := f.Validate(now, s.cap); err != nil {
		return store.Feature{}, err
	}
	// By the cluster's clock, as the change feed's records are stamped:
	// a position is told to be of before the feature (store.CheckResume).
	f.CreatedAt = s.clock.Now().Truncate(time.Millisecond).UTC()
	f.ItemsSince, f.LiveSince = 0, time.Time{}
	ttl := int(f.TTL / time.Second)
	existing := map[string]any{}
	applied, err := s.session.Query(s.stmt.insertFeature, f.EntityType, f.Name, f.Version, string(f.ValueType), ttl, f.Description, f.CreatedAt, nullable(f.MaxItems), f.Live).
		WithContext(ctx).SerialConsistency(s.cfg.SerialConsistency).Consistency(s.cfg.WriteConsistency).MapScanCAS(existing)
	if err != nil {
		return store.Feature{}, classify("creating feature "+f.Key(), err)
	}
	if applied {
		return f, nil
	}
	deletedAt, _ := existing["deleted_at"].(time.Time)
	if deletedAt.IsZero() {
		return store.Feature{}, store.FeatureExists(f.Key())
	}
	old := store.Feature{ValueType: store.ValueType(fmt.Sprint(existing["value_type"]))}
	old.MaxItems, _ = existing["max_items"].(int)
	if err := store.CheckRecreate(&old, &f, deletedAt, now, s.cfg.RecreateWait); err != nil {
		return store.Feature{}, err
	}
	if was, _ := existing["created_at"].(time.Time); !f.CreatedAt.After(was) {
		// Another feature, another list in the change feed: created at
		// once after its deletion, within the same millisecond, it still
		// comes after the one deleted.
		f.CreatedAt = was.Add(time.Millisecond).UTC()
	}
	f.ItemsSince = writeTimestamp()
	applied, err = s.session.Query(s.stmt.recreateFeature, string(f.ValueType), ttl, f.Description, f.CreatedAt, nullable(f.MaxItems), f.ItemsSince, f.Live, f.EntityType, f.Name, f.Version, deletedAt).
		WithContext(ctx).SerialConsistency(s.cfg.SerialConsistency).Consistency(s.cfg.WriteConsistency).MapScanCAS(map[string]any{})
	if err != nil {
		return store.Feature{}, classify("creating feature "+f.Key()+" again", err)
	}
	if !applied {
		return store.Feature{}, fmt.Errorf("feature %s: %w: it was changed concurrently; try again", f.Key(), errkind.Conflict)
	}
	return f, nil
}

// nullable is n, or null for 0.
func nullable(n int) any {
	if n == 0 {
		return nil
	}
	return n
}

// Features lists the live features, of one entity type or of all.
func (s *Store) Features(ctx context.Context, entityType string) ([]store.Feature, error) {
	var q *gocql.Query
	if entityType == "" {
		q = s.session.Query(s.stmt.selectFeatures)
	} else {
		if err := keys.ValidateName("entity type", entityType); err != nil {
			return nil, err
		}
		q = s.session.Query(s.stmt.selectFeaturesOfType, entityType)
	}
	iter := s.iter(q.WithContext(ctx).Consistency(s.cfg.ReadConsistency).Idempotent(true))
	var out []store.Feature
	for {
		f, deleted, ok := scanFeature(iter)
		if !ok {
			break
		}
		if !deleted {
			out = append(out, f)
		}
	}
	if err := iter.Close(); err != nil {
		return nil, classify("listing features", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key() < out[j].Key() })
	return out, nil
}

func scanFeature(iter *gocql.Iter) (f store.Feature, deleted bool, ok bool) {
	var valueType string
	var ttl int
	var deletedAt time.Time
	var live *bool
	ok = iter.Scan(&f.EntityType, &f.Name, &f.Version, &valueType, &ttl, &f.Description, &f.CreatedAt, &deletedAt, &f.MaxItems, &f.ItemsSince, &live, &f.LiveSince)
	// A row written before the column existed has no value: live, as every
	// feature was then, so that an upgrade ends no subscription.
	f.Live = live == nil || *live
	if !f.LiveSince.IsZero() {
		f.LiveSince = f.LiveSince.UTC()
	}
	f.ValueType = store.ValueType(valueType)
	f.TTL = time.Duration(ttl) * time.Second
	f.CreatedAt = f.CreatedAt.UTC()
	return f, !deletedAt.IsZero(), ok
}

// DeleteFeature marks one version deleted; its items are left to expire.
func (s *Store) DeleteFeature(ctx context.Context, entityType, name, version string) (bool, error) {
	if err := keys.ValidateFeature(entityType, name, version); err != nil {
		return false, err
	}
	iter := s.iter(s.session.Query(s.stmt.selectFeature, entityType, name, version).WithContext(ctx).
		Consistency(s.cfg.ReadConsistency).SerialConsistency(s.cfg.SerialConsistency).Idempotent(true))
	f, deleted, ok := scanFeature(iter)
	if err := iter.Close(); err != nil {
		return false, classify("reading feature "+keys.FeatureKey(entityType, name, version), err)
	}
	if !ok || deleted {
		return false, nil
	}
	now := s.now().Truncate(time.Millisecond).UTC()
	applied, err := s.session.Query(s.stmt.deleteFeature, now, entityType, name, version, f.CreatedAt).
		WithContext(ctx).SerialConsistency(s.cfg.SerialConsistency).Consistency(s.cfg.WriteConsistency).MapScanCAS(map[string]any{})
	if err != nil {
		return false, classify("deleting feature "+f.Key(), err)
	}
	return applied, nil
}

// SetFeatureLive makes a feature live or not, by a lightweight
// transaction on the version read, so that it never touches a feature
// deleted or created again meanwhile. Made live, it records when
// (live_since), for CheckLiveSince.
func (s *Store) SetFeatureLive(ctx context.Context, entityType, name, version string, live bool) (store.Feature, error) {
	if err := keys.ValidateFeature(entityType, name, version); err != nil {
		return store.Feature{}, err
	}
	key := keys.FeatureKey(entityType, name, version)
	iter := s.iter(s.session.Query(s.stmt.selectFeature, entityType, name, version).WithContext(ctx).
		Consistency(s.cfg.ReadConsistency).Idempotent(true))
	f, deleted, ok := scanFeature(iter)
	if err := iter.Close(); err != nil {
		return store.Feature{}, classify("reading feature "+key, err)
	}
	if !ok || deleted {
		return store.Feature{}, fmt.Errorf("feature %s: %w", key, errkind.NotFound)
	}
	if f.Live == live {
		return f, nil
	}
	f.Live = live
	if live {
		f.LiveSince = store.NextLiveSince(s.clock.Now(), f.LiveSince) // by the clock the feed's records are stamped by
	}
	var since any
	if !f.LiveSince.IsZero() {
		since = f.LiveSince
	}
	applied, err := s.session.Query(s.stmt.setFeatureLive, live, since, entityType, name, version, f.CreatedAt).
		WithContext(ctx).SerialConsistency(s.cfg.SerialConsistency).Consistency(s.cfg.WriteConsistency).MapScanCAS(map[string]any{})
	if err != nil {
		return store.Feature{}, classify("setting feature "+key+" live", err)
	}
	if !applied {
		return store.Feature{}, fmt.Errorf("feature %s: %w: it was deleted or created again concurrently; try again", key, errkind.Conflict)
	}
	return f, nil
}
