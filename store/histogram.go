package store

import (
	"context"
	"fmt"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store/keys"
)

// Buckets split a window into buckets of one width: bucket i holds the
// timestamps from MinTimestamp + i×Width to MinTimestamp + (i+1)×Width − 1,
// and the last ends at MaxTimestamp (it may be narrower).
type Buckets struct {
	Window       // both bounds inclusive; MaxTimestamp at least 1
	Width  int64 // ns, at least 1
}

// MaxBuckets bounds the buckets of one histogram, whatever the caller
// allows: the counts are held in memory while the list is read.
const MaxBuckets = 100_000

// Len is how many buckets the window holds.
func (b Buckets) Len() int64 {
	return (b.MaxTimestamp-b.MinTimestamp)/b.Width + 1
}

// Validate checks the buckets.
func (b Buckets) Validate() error {
	if err := b.Window.Validate(); err != nil {
		return err
	}
	switch {
	case b.Width < 1:
		return fmt.Errorf("%w bucket width: must be at least 1 ns", errkind.Invalid)
	case b.MaxTimestamp < 1 || b.MaxTimestamp < b.MinTimestamp:
		return fmt.Errorf("%w histogram window: maxTimestamp must be set, and not before minTimestamp", errkind.Invalid)
	case b.Len() > MaxBuckets:
		return fmt.Errorf("%w histogram: %d buckets, more than %d", errkind.Invalid, b.Len(), MaxBuckets)
	}
	return nil
}

// HistogramItems counts the visible items of a list in each bucket with
// scan, in one read of keys alone (an item key starts with its
// timestamp), as CountItems counts them. ErrTooManyRows when that means
// looking at more than maxRows rows.
func HistogramItems(ctx context.Context, l List, b Buckets, maxRows int, scan Scanner) ([]int, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	counts := make([]int, b.Len())
	v := &view{f: l.Feature}
	rg := regionOf(b.Window, "")
	err := v.scanKeys(ctx, rg, maxRows, scan, func(row Row, ranked bool) bool {
		if ranked && row.Key >= rg.before {
			return true // above the window: ranked, not counted
		}
		ts := keys.ItemTimestamp(row.Key)
		if ts >= b.MinTimestamp && ts <= b.MaxTimestamp {
			counts[(ts-b.MinTimestamp)/b.Width]++
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}
