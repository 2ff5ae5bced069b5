package graph

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/graph-gophers/dataloader/v7"

	"github.com/listgate/listgate/store"
)

// LoaderConfig tunes the per-request list loader.
type LoaderConfig struct {
	// Wait is how long a batch gathers keys before it runs. gqlgen resolves
	// the fields of a list concurrently, so every Entity.list of a request
	// reaches the loader within microseconds; dataloader's 16 ms default
	// would cost more than a ScyllaDB read.
	Wait time.Duration
	// MaxBatch runs a batch at once when it holds this many keys.
	MaxBatch int
	// Concurrency bounds the queries one batch runs at once.
	Concurrency int
}

// DefaultLoaderConfig is tuned for a ScyllaDB read's latency.
var DefaultLoaderConfig = LoaderConfig{Wait: 500 * time.Microsecond, MaxBatch: 1000, Concurrency: 32}

// listKey names one page of one list. Equal keys in one request are read
// once. The feature pointer comes from the catalog snapshot, so equal
// feature keys give equal pointers.
type listKey struct {
	feature  *store.Feature
	entityID string
	r        store.Range
}

// loaders holds one request's dataloaders. A request's loads only ever
// batch with each other, so no request's cancellation reaches another's
// keys.
type loaders struct {
	list *dataloader.Loader[listKey, store.Page]
}

type loadersKey struct{}

// withLoaders is middleware that gives every request fresh loaders.
func withLoaders(s store.Store, cfg LoaderConfig) func(http.Handler) http.Handler {
	batch := listBatch(s, cfg.Concurrency)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			l := &loaders{list: dataloader.NewBatchedLoader(batch,
				dataloader.WithWait[listKey, store.Page](cfg.Wait),
				dataloader.WithBatchCapacity[listKey, store.Page](cfg.MaxBatch),
			)}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), loadersKey{}, l)))
		})
	}
}

func loadersFor(ctx context.Context) *loaders {
	return ctx.Value(loadersKey{}).(*loaders)
}

// listBatch reads each list of a batch with its own single-partition query,
// at most concurrency at once; never a multi-partition IN. Each key gets its
// own result, so one failing list fails only its field.
func listBatch(s store.Store, concurrency int) dataloader.BatchFunc[listKey, store.Page] {
	return func(ctx context.Context, keys []listKey) []*dataloader.Result[store.Page] {
		results := make([]*dataloader.Result[store.Page], len(keys))
		read := func(i int) {
			k := keys[i]
			p, err := s.Items(ctx, store.List{Feature: k.feature, EntityID: k.entityID}, k.r)
			results[i] = &dataloader.Result[store.Page]{Data: p, Error: err}
		}
		if len(keys) == 1 {
			read(0)
			return results
		}
		sem := make(chan struct{}, concurrency)
		var wg sync.WaitGroup
		for i := range keys {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				read(i)
			})
		}
		wg.Wait()
		return results
	}
}
