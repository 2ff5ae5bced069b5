package graph

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/graph-gophers/dataloader/v7"
	dlotel "github.com/graph-gophers/dataloader/v7/trace/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/listgate/listgate/store"
)

// LoaderConfig tunes the per-request list loader.
type LoaderConfig struct {
	// Wait is how long a batch gathers keys before it runs. gqlgen resolves
	// the fields of a list concurrently, so every Entity.list of a request
	// reaches the loader within microseconds; dataloader's 16 ms default
	// would cost more than a ScyllaDB read. Keys that arrive later start
	// another batch; each key is read once per request all the same.
	Wait time.Duration
	// MaxBatch runs a batch at once when it holds this many keys.
	MaxBatch int
	// Concurrency bounds the queries one batch runs at once.
	Concurrency int
}

// DefaultLoaderConfig is what bench/ measured best. A batch only bounds
// concurrency (every key is its own query) and the resolvers of a list load
// within microseconds of each other, so no wait is needed; and a timer of
// even 10 µs sleeps about a millisecond in an idle Go process on a VM
// (measured: 0.5–1.1 ms), which a 1-entity request paid in full (p50 3.1
// ms with 100 µs, 2.2 ms with none). 128 queries at once read a 100-entity
// request in one wave (32 at once: 3.1× the 1-entity p50; 128: 2.8×).
var DefaultLoaderConfig = LoaderConfig{Wait: 0, MaxBatch: 1000, Concurrency: 128}

// listKey names one page of one list. Equal keys in one request are read
// once. The feature pointer comes from the catalog snapshot, so equal
// feature keys give equal pointers.
type listKey struct {
	feature  *store.Feature
	entityID string
	r        store.Range
}

// String names the key in the batch span's keys.
func (k listKey) String() string {
	return fmt.Sprintf("%s/%s min=%d limit=%d after=%q", k.feature.Key(), k.entityID, k.r.MinTimestamp, k.r.Limit, k.r.After)
}

// loaders holds one request's dataloaders, made on first use: most
// requests read no Entity.list. A request's loads only ever batch with each
// other, so no request's cancellation reaches another's keys.
type loaders struct {
	once sync.Once
	ll   *listLoader
	list *dataloader.Loader[listKey, store.Page]
}

// listLoaderFor returns the request's list loader.
func listLoaderFor(ctx context.Context) *dataloader.Loader[listKey, store.Page] {
	l := &requestFrom(ctx).loaders
	l.once.Do(func() {
		l.list = dataloader.NewBatchedLoader(l.ll.batch,
			dataloader.WithWait[listKey, store.Page](l.ll.cfg.Wait),
			dataloader.WithBatchCapacity[listKey, store.Page](l.ll.cfg.MaxBatch),
			// The channel that gathers a batch's keys; dataloader's 1,000
			// slots cost 8 KB per request, most reading one list.
			dataloader.WithInputCapacity[listKey, store.Page](64),
			dataloader.WithTracer[listKey, store.Page](l.ll.tracer),
		)
	})
	return l.list
}

// listLoader makes the per-request list loaders.
type listLoader struct {
	store   store.Store
	onPanic graphql.RecoverFunc // a panic in a read fails its key, logged and counted
	// maxResponseBytes: once a request's response holds this many bytes
	// of list items, its remaining reads are not made.
	maxResponseBytes int
	cfg              LoaderConfig
	tracer           *dlotel.Tracer[listKey, store.Page]
	batchSize        metric.Int64Histogram
}

func newListLoader(s store.Store, cfg LoaderConfig, tracer trace.Tracer, meter metric.Meter, onPanic graphql.RecoverFunc) (*listLoader, error) {
	size, err := meter.Int64Histogram("listgate.loader.batch.size",
		metric.WithDescription("Keys in each batch of the list loader."),
		metric.WithExplicitBucketBoundaries(1, 2, 5, 10, 20, 50, 100, 200, 500, 1000))
	if err != nil {
		return nil, err
	}
	return &listLoader{store: s, onPanic: onPanic, cfg: cfg, tracer: dlotel.NewTracer[listKey, store.Page](tracer), batchSize: size}, nil
}

// batch reads each list of a batch with its own single-partition query, at
// most Concurrency at once; never a multi-partition IN. Each key gets its
// own result, so one failing list fails only its field.
func (ll *listLoader) batch(ctx context.Context, keys []listKey) []*dataloader.Result[store.Page] {
	ll.batchSize.Record(ctx, int64(len(keys)))
	results := make([]*dataloader.Result[store.Page], len(keys))
	read := func(i int) {
		// Reads run in goroutines of their own, where a panic would end
		// the process: it fails the key instead.
		defer func() {
			if p := recover(); p != nil {
				results[i] = &dataloader.Result[store.Page]{Error: ll.onPanic(ctx, p)}
			}
		}()
		k := keys[i]
		if req := requestFrom(ctx); req != nil && req.responseBytes.Load() > int64(ll.maxResponseBytes) {
			// The response is already full: reading more would only hold
			// memory for fields that will fail.
			results[i] = &dataloader.Result[store.Page]{Error: tooLarge(k.feature, ll.maxResponseBytes)}
			return
		}
		p, err := ll.store.Items(ctx, store.List{Feature: k.feature, EntityID: k.entityID}, k.r)
		results[i] = &dataloader.Result[store.Page]{Data: p, Error: err}
	}
	if len(keys) == 1 {
		read(0)
		return results
	}
	sem := make(chan struct{}, ll.cfg.Concurrency)
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
