package lists

import (
	"context"
	"errors"
	"fmt"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// Features returns the live features of one entity type, or of all when
// entityType is "", ordered by key, for one field of an operation's
// response: they are charged to its bound (MaxResponseBytes) as shown,
// before anything is written, so an answer past it is refused whole.
func (s *Service) Features(ctx context.Context, entityType string, shown ShownFeature) ([]*store.Feature, error) {
	if entityType != "" {
		if err := keys.ValidateName("entity type", entityType); err != nil {
			return nil, err
		}
	}
	fs, err := s.catalog.Features(ctx, entityType)
	if err != nil {
		return nil, err
	}
	if err := s.chargeFeatures(ctx, fs, shown); err != nil {
		return nil, err
	}
	return fs, nil
}

// Feature returns one version of a feature, nil if there is none, for one
// field of an operation's response, charged to its bound as Features
// charges its features.
func (s *Service) Feature(ctx context.Context, entityType, name, version string, shown ShownFeature) (*store.Feature, error) {
	f, err := s.catalog.Feature(ctx, entityType, name, version)
	if errors.Is(err, errkind.NotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := s.chargeFeatures(ctx, []*store.Feature{f}, shown); err != nil {
		return nil, err
	}
	return f, nil
}

// Known returns a feature the catalog's snapshot holds, or nil, without
// reading the store: what guards price a read by.
func (s *Service) Known(entityType, name, version string) *store.Feature {
	return s.catalog.Known(entityType, name, version)
}

// KnownCount is how many features of one entity type, or of all when it
// is "", the catalog's snapshot holds, without reading the store: what
// guards price a list of features by.
func (s *Service) KnownCount(entityType string) int { return s.catalog.Count(entityType) }

// CatalogGeneration changes whenever the catalog's snapshot does.
func (s *Service) CatalogGeneration() uint64 { return s.catalog.Generation() }

// CreateFeature creates a feature. While a mutation operation is checked,
// it checks f against the catalog and the features created before it.
func (s *Service) CreateFeature(ctx context.Context, f store.Feature) (store.Feature, error) {
	c := checkFrom(ctx)
	if c == nil {
		return s.catalog.Create(ctx, f) // the catalog checks it
	}
	if err := f.Validate(s.now(), s.store.ExpiryCap()); err != nil {
		return f, err
	}
	if _, err := s.feature(ctx, f.EntityType, f.Name, f.Version); err == nil {
		return f, store.FeatureExists(f.Key())
	}
	if old := s.catalog.Known(f.EntityType, f.Name, f.Version); old != nil && c.deleted[f.Key()] {
		// An earlier field deletes it: it comes back as the store allows.
		if err := store.CheckRecreate(old, &f, s.now(), s.now(), s.catalog.RecreateWait()); err != nil {
			return f, err
		}
	}
	c.create(&f)
	return f, nil
}

// CreateVersion creates another version of a feature: the same value
// type, with the TTL, description and cap given or those of its latest
// version.
func (s *Service) CreateVersion(ctx context.Context, entityType, name, version string, ch features.VersionChanges) (store.Feature, error) {
	c := checkFrom(ctx)
	if c == nil {
		return s.catalog.CreateVersion(ctx, entityType, name, version, ch)
	}
	// The newest version, as the catalog would take it (not one an
	// earlier field deletes), or one an earlier field creates.
	var base *store.Feature
	for _, f := range s.catalog.List(entityType) {
		if f.Name == name && !c.deleted[f.Key()] && (base == nil || f.CreatedAt.After(base.CreatedAt)) {
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
			return store.Feature{}, err
		}
		return store.Feature{}, fmt.Errorf("feature %s#%s: %w: create it with createListFeature first", entityType, name, errkind.NotFound)
	}
	v := ch.Apply(*base, version)
	if err := v.Validate(s.now(), s.store.ExpiryCap()); err != nil {
		return v, err
	}
	if _, err := s.feature(ctx, entityType, name, version); err == nil {
		return v, store.FeatureExists(v.Key())
	}
	c.create(&v)
	return v, nil
}

// DeleteFeature deletes every version of a feature and returns how many
// there were.
func (s *Service) DeleteFeature(ctx context.Context, entityType, name string) (int, error) {
	if err := keys.ValidateFeature(entityType, name, ""); err != nil {
		return 0, err
	}
	if c := checkFrom(ctx); c != nil {
		for _, f := range s.catalog.List(entityType) {
			if f.Name == name {
				c.forget(f.Key())
			}
		}
		for key, f := range c.created {
			if f.EntityType == entityType && f.Name == name {
				c.forget(key)
			}
		}
		return 0, nil
	}
	return s.catalog.Delete(ctx, entityType, name)
}

// DeleteVersion deletes one version of a feature; false if it did not
// exist.
func (s *Service) DeleteVersion(ctx context.Context, entityType, name, version string) (bool, error) {
	if err := keys.ValidateFeature(entityType, name, version); err != nil {
		return false, err
	}
	if c := checkFrom(ctx); c != nil {
		c.forget(keys.FeatureKey(entityType, name, version))
		return false, nil
	}
	return s.catalog.DeleteVersion(ctx, entityType, name, version)
}

// SetFeatureLive makes one version of a feature live or not. While a
// mutation operation is checked, it checks that the feature exists.
func (s *Service) SetFeatureLive(ctx context.Context, entityType, name, version string, live bool) (store.Feature, error) {
	if checking(ctx) {
		f, err := s.feature(ctx, entityType, name, version)
		if err != nil {
			return store.Feature{}, err
		}
		v := *f
		v.Live = live
		return v, nil
	}
	return s.catalog.SetLive(ctx, entityType, name, version, live)
}
