package load

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/store"
)

// StoreTarget writes into a store opened directly, as a gateway's adds
// do: the feature catalog a gateway keeps (so that a feature deleted,
// re-created or made live is seen as a gateway sees it), and each list's
// items through store.Store.AddItems, whose checks, item keys, TTLs and
// caps are the gateway's, and which records the adds of a live feature
// in the change feed as the gateway's do.
type StoreTarget struct {
	Store   store.Store
	Catalog *features.Catalog
	// Retries is how many times a write that failed for a reason that may
	// pass (the cluster timed out, say) is tried again.
	Retries int
}

func (t *StoreTarget) Feature(ctx context.Context, entityType, name, version string) (*store.Feature, error) {
	return t.Catalog.Feature(ctx, entityType, name, version)
}

func (t *StoreTarget) Limits() Limits {
	sl := t.Store.Limits()
	return Limits{ListItems: sl.MaxAddItems, ListBytes: sl.MaxAddBytes, BatchLists: 1,
		BatchItems: sl.MaxAddItems, BatchBytes: math.MaxInt, ValueBytes: sl.MaxValueBytes}
}

func (t *StoreTarget) ExpiryCap() time.Time { return t.Store.ExpiryCap() }

// Write writes the batch's one add.
func (t *StoreTarget) Write(ctx context.Context, b Batch) ([]Refused, error) {
	var refused []Refused
	for i, a := range b {
		err := retry(ctx, t.Retries, func() error {
			if err := t.Catalog.Fresh(); err != nil {
				return err
			}
			_, err := t.Store.AddItems(ctx, a.List, a.Items)
			return err
		})
		switch {
		case err == nil:
		case errors.Is(err, errkind.Invalid):
			refused = append(refused, Refused{Add: i, Err: err})
		default:
			return refused, fmt.Errorf("adding %d items to %s/%s: %w", len(a.Items), a.List.Feature.Key(), a.List.EntityID, err)
		}
	}
	return refused, nil
}

func (t *StoreTarget) Close() error { return t.Store.Close() }

// retry runs write until it succeeds, fails for good, or has failed
// retries more times for a reason that may pass (errkind.Unavailable or
// Timeout), waiting between tries from 100 ms, doubling, to 5 s.
func retry(ctx context.Context, retries int, write func() error) error {
	wait := 100 * time.Millisecond
	for try := 0; ; try++ {
		err := write()
		if err == nil || try >= retries || !(errors.Is(err, errkind.Unavailable) || errors.Is(err, errkind.Timeout)) {
			return err
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
