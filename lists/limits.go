package lists

import (
	"fmt"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
	"github.com/listgate/listgate/values"
)

// Limits bound what one call may ask for. Each is a flag of the gateway,
// named in the error that enforces it.
type Limits struct {
	MaxListLimit     int // largest limit of one page (--max-list-limit)
	MaxEntities      int // most entities one call may name (--max-entities)
	MaxResponseBytes int // bytes of list items, features and errors one response may carry (--max-response-bytes)
	// MaxCount bounds the rows a count, or a search for values, may look
	// at (--max-count).
	MaxCount int
	// MaxScanFactor bounds the rows a page that leaves rows out (distinct,
	// or of a feature created again) may look at: this many per item of
	// its limit (--max-scan-factor).
	MaxScanFactor int
	MaxValues     int // values of one search or removal (--max-values)
	MaxBuckets    int // buckets of one histogram (--max-buckets)
	MaxBatchLists int // lists of one batch add (--max-batch-lists)
}

// DefaultLimit is the items of a page when the caller gives no limit.
const DefaultLimit = 100

// The bounds of the arguments of a call, each its own check, so that the
// GraphQL edge can apply them before it estimates what a request costs.

// Limits are the service's bounds.
func (s *Service) Limits() Limits { return s.limits }

// CheckLimit checks the limit of a page, as it was sent.
func (s *Service) CheckLimit(limit int64) error {
	if limit < 1 || limit > int64(s.limits.MaxListLimit) {
		return fmt.Errorf("%w limit %d: must be from 1 to %d (--max-list-limit)", errkind.Invalid, limit, s.limits.MaxListLimit)
	}
	return nil
}

// CheckValueCount checks how many values a search or a removal names.
func (s *Service) CheckValueCount(n int) error {
	if n == 0 || n > s.limits.MaxValues {
		return fmt.Errorf("%w values: %d given, must be from 1 to %d (--max-values)", errkind.Invalid, n, s.limits.MaxValues)
	}
	return nil
}

// CheckBatch checks the size of a batch add: its lists, and its items in
// all.
func (s *Service) CheckBatch(lists, items int) error {
	if lists == 0 || lists > s.limits.MaxBatchLists {
		return fmt.Errorf("%w adds: %d lists, must be from 1 to %d (--max-batch-lists)", errkind.Invalid, lists, s.limits.MaxBatchLists)
	}
	if limit := s.store.Limits().MaxAddItems; items > limit {
		return fmt.Errorf("%w adds: %d items in all, more than the %d one request may add (--max-add-items)", errkind.Invalid, items, limit)
	}
	return nil
}

// CheckEntity checks an entity's type and id.
func (s *Service) CheckEntity(entityType, id string) error {
	if err := keys.ValidateName("entity type", entityType); err != nil {
		return err
	}
	return keys.ValidateEntityID(id)
}

// CheckEntities checks the entities one call names.
func (s *Service) CheckEntities(entityType string, ids []string) error {
	if err := keys.ValidateName("entity type", entityType); err != nil {
		return err
	}
	if len(ids) > s.limits.MaxEntities {
		return fmt.Errorf("%w entityIds: %d ids, more than the %d one request may ask for (--max-entities)", errkind.Invalid, len(ids), s.limits.MaxEntities)
	}
	for i, id := range ids {
		if err := keys.ValidateEntityID(id); err != nil {
			return fmt.Errorf("entityIds[%d]: %w", i, err)
		}
	}
	return nil
}

// encodeValues encodes values of a feature's type, at most MaxValues.
func (s *Service) encodeValues(f *store.Feature, vs []values.Value) ([][]byte, error) {
	if err := s.CheckValueCount(len(vs)); err != nil {
		return nil, err
	}
	out := make([][]byte, len(vs))
	for i, v := range vs {
		b, err := values.Encode(f.ValueType, v.Raw)
		if err != nil {
			return nil, fmt.Errorf("values[%d]: %w", i, err)
		}
		out[i] = b
	}
	return out, nil
}
