package embedded

import (
	"bytes"
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/listgate/listgate/store"
)

// Export reads every item of the lists of features (store.Exporter): for
// each feature, one scan of the v entries under its key, backwards, so
// that each list's rows come newest first, as store.ExportRuns needs them.
// fn runs between the scan's rows, on this goroutine.
func (s *Store) Export(ctx context.Context, features []*store.Feature, fn func(store.ListItems) error) error {
	gather := store.NewExportRuns(features, fn)
	for _, f := range features {
		if err := s.exportFeature(ctx, f, gather); err != nil {
			return err
		}
	}
	return gather.Flush()
}

// exportFeature hands gather the live rows of one feature's lists.
func (s *Store) exportFeature(ctx context.Context, f *store.Feature, gather *store.ExportRuns) error {
	fk := f.Key()
	// Feature keys hold no 0x00, so the one after the key ends it: a
	// feature whose key starts with this one's is not read.
	prefix := append(append([]byte{valuePrefix}, fk...), 0)
	upper := append(bytes.Clone(prefix[:len(prefix)-1]), 1)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("exporting list items: %w", err)
	}
	defer it.Close()
	now := s.now().Unix()
	n := 0
	defer func() { s.rows.Read(ctx, n, true) }()
	looked := 0
	for ok := it.Last(); ok; ok = it.Prev() {
		if looked++; looked%checkEvery == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		v := it.Value()
		expiry := expiryOf(v)
		if expiry <= now {
			continue
		}
		// The rest of the key is <entityID> 00 <itemKey>.
		rest := it.Key()[len(prefix):]
		sep := bytes.IndexByte(rest, 0)
		if sep < 0 {
			return fmt.Errorf("exporting list items: malformed entry %q", it.Key())
		}
		n++
		row := store.Row{Key: string(rest[sep+1:]), Value: bytes.Clone(v[8:])}
		if err := gather.Row(fk, string(rest[:sep]), row, expiry); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("exporting list items: %w", err)
	}
	return nil
}
