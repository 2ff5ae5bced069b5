package store

import (
	"context"
	"fmt"

	"github.com/listgate/listgate/store/keys"
)

// An export reads every item of some features' lists, whatever their
// entity ids: on a cluster by token-range scans of the whole table, on the
// embedded store by a prefix scan of each feature. Which rows it yields is
// decided here, by the rules of a read (read.go): a row written before
// its feature was created again, or past a capped list's newest MaxItems,
// is not an item of the list and is not exported.

// ExportedItem is an item as an export reads it.
type ExportedItem struct {
	Key       string
	Timestamp int64 // ns since the Unix epoch
	Value     []byte
	// Expiry is when the store drops it, in seconds since the Unix
	// epoch; 0 when the row has no TTL (written so by another tool).
	Expiry int64
}

// ListItems is a run of one list's items, newest first.
type ListItems struct {
	Feature  *Feature
	EntityID string
	Items    []ExportedItem
}

// ExportRun bounds the items of one ListItems.
const ExportRun = 256

// Exporter is a store that can read every item of features' lists.
type Exporter interface {
	// Export calls fn with every item of the lists of features that a
	// read could show (unexpired, visible), once each, in runs of one
	// list's items (ListItems, at most ExportRun items): a list's items
	// come newest first, in one run or in several with other lists' runs
	// between them. fn runs on the caller's goroutine, one call at a
	// time, and may keep what it is given; Export stops at fn's first
	// error and returns it. What Export holds at once is bounded whatever
	// the number of items.
	Export(ctx context.Context, features []*Feature, fn func(ListItems) error) error
}

// ExportRuns gathers a scan's rows into runs of one list's visible items.
// A backend hands it every row it reads, a list's rows together and newest
// first; rows of features it was not given are left out. It is one scan's
// own: not safe for use by two goroutines at once.
type ExportRuns struct {
	features map[string]*Feature // by feature key
	emit     func(ListItems) error
	run      ListItems
	view     view // ranks the rows of run's list
}

// NewExportRuns gathers the rows of features into runs, which it hands to
// emit.
func NewExportRuns(features []*Feature, emit func(ListItems) error) *ExportRuns {
	r := &ExportRuns{features: make(map[string]*Feature, len(features)), emit: emit}
	for _, f := range features {
		r.features[f.Key()] = f
	}
	return r
}

// Row takes one row of a list (its Key, Value and, for a feature created
// again, WriteTime) and the row's expiry (s since the epoch, 0: none).
// Rows of a list must come together, newest first.
func (r *ExportRuns) Row(featureKey, entityID string, row Row, expiry int64) error {
	f := r.features[featureKey]
	if f == nil {
		return nil
	}
	if r.run.Feature != f || r.run.EntityID != entityID {
		if err := r.Flush(); err != nil {
			return err
		}
		r.run = ListItems{Feature: f, EntityID: entityID}
		r.view = view{f: f}
	}
	if ok, _ := r.view.visible(row); !ok {
		return nil
	}
	ts, err := keys.ParseItemKey(row.Key)
	if err != nil {
		return fmt.Errorf("list %s of %s: a row's item key: %w", entityID, featureKey, err)
	}
	if r.run.Items == nil {
		r.run.Items = make([]ExportedItem, 0, ExportRun)
	}
	r.run.Items = append(r.run.Items, ExportedItem{Key: row.Key, Timestamp: ts, Value: row.Value, Expiry: expiry})
	if len(r.run.Items) == ExportRun {
		return r.Flush()
	}
	return nil
}

// Flush hands the items gathered to emit; a scan calls it at its end.
func (r *ExportRuns) Flush() error {
	if len(r.run.Items) == 0 {
		return nil
	}
	run := r.run
	r.run.Items = nil
	return r.emit(run)
}
