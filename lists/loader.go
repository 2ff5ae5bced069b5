package lists

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/graph-gophers/dataloader/v7"
	dlotel "github.com/graph-gophers/dataloader/v7/trace/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/watch"
)

// LoaderConfig tunes the per-operation page loader.
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

// readOp is what a read asks of a list.
type readOp uint8

const (
	readPage      readOp = iota // a page of items
	readCount                   // how many items a window holds
	readFind                    // the newest item holding each of some values
	readHistogram               // how many items each bucket of a window holds
)

// readKey names one read of one list. Equal keys in one request are read
// once. The feature pointer comes from the catalog snapshot, so equal
// feature keys give equal pointers.
type readKey struct {
	op       readOp
	feature  *store.Feature
	entityID string
	r        store.Range // a page's range; a count's or histogram's window; a search's MinTimestamp
	values   string      // a search's encoded values (joinValues)
	width    int64       // a histogram's bucket width, ns
}

// String names the key in the batch span's keys.
func (k readKey) String() string {
	return fmt.Sprintf("%s %s/%s min=%d max=%d limit=%d after=%q distinct=%v values=%d width=%d", [...]string{"page", "count", "find", "histogram"}[k.op],
		k.feature.Key(), k.entityID, k.r.MinTimestamp, k.r.MaxTimestamp, k.r.Limit, k.r.After, k.r.Distinct, len(splitValues(k.values)), k.width)
}

// readResult is what a read gives, by its op.
type readResult struct {
	page    store.Page
	count   int
	found   []string // item keys, "" where none holds the value
	buckets []int    // a histogram's counts
}

// loader makes the per-operation page loaders.
type loader struct {
	s         *Service
	cfg       LoaderConfig
	onPanic   func(ctx context.Context, p any) error
	tracer    *dlotel.Tracer[readKey, readResult] // nil: no spans
	batchSize metric.Int64Histogram
}

// BatchSizeBounds are the buckets of listgate_loader_batch_size, and
// BatchSizeHelp its description.
var BatchSizeBounds = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}

const BatchSizeHelp = "Keys in each batch of the list loader."

func newLoader(s *Service, cfg LoaderConfig, tracer trace.Tracer, meter metric.Meter, onPanic func(context.Context, any) error) (*loader, error) {
	size, err := meter.Int64Histogram("listgate.loader.batch.size",
		metric.WithDescription(BatchSizeHelp),
		metric.WithExplicitBucketBoundaries(BatchSizeBounds...))
	if err != nil {
		return nil, err
	}
	if onPanic == nil {
		onPanic = func(_ context.Context, p any) error { return fmt.Errorf("panic: %v", p) }
	}
	l := &loader{s: s, cfg: cfg, onPanic: onPanic, batchSize: size}
	if tracer != nil {
		l.tracer = dlotel.NewTracer[readKey, readResult](tracer)
	}
	return l, nil
}

// Reads is what the service keeps for one operation: its loader, made on
// first use, the bytes of list items and errors it has shown, and what it
// holds of the answers' bytes. An operation's
// loads only ever batch with each other, so no operation's cancellation
// reaches another's keys. The zero value is ready for use.
type Reads struct {
	once   sync.Once
	loader *dataloader.Loader[readKey, readResult]
	single atomic.Bool // the operation makes at most one read
	// scanShare, when not 0, is the most rows each count or histogram of
	// a list without a cap may look at, set before the operation runs
	// (SetScanShare).
	scanShare int
	bytes     atomic.Int64 // of the list items and errors the response shows, up to MaxResponseBytes
	// catchUpCaller and catchUpCharge are whose share of the catch-up
	// bytes a subscription's pages take, and how they are priced, set
	// before it runs (SetCatchUp); nil: they are free.
	catchUpCaller string
	catchUpCharge watch.Charge
	answer        answer // what it holds of the answers' bytes (answers.go)
}

// SetCatchUp says whose the catch-up pages of the subscription in ctx
// are (they take that caller's share of the catch-up bytes), and how they
// are charged: to its caller's budget, by the guards that priced it.
func SetCatchUp(ctx context.Context, caller string, charge watch.Charge) {
	if r := readsFrom(ctx); r != nil {
		r.catchUpCaller, r.catchUpCharge = caller, charge
	}
}

// SetScanShare says that each count or histogram of a list without a
// cap in the operation in ctx may look at no more than rows rows: its
// share of what the operation was priced for, when more of them than
// --max-count each would pay for share it. Called before it runs.
func SetScanShare(ctx context.Context, rows int) {
	if r := readsFrom(ctx); r != nil {
		r.scanShare = rows
	}
}

// scanRows is the most rows one count or histogram of f may look at for
// the operation of req: --max-count, or its share when that is lower. A
// capped list's scan stops past its cap whatever the bound
// (store.CapRows), and was priced so.
func (s *Service) scanRows(req *Reads, f *store.Feature) int {
	if req != nil && req.scanShare > 0 && store.CapRows(f) == 0 {
		return min(s.limits.MaxCount, req.scanShare)
	}
	return s.limits.MaxCount
}

type readsKey struct{}

// WithReads returns a context whose reads share r's loader and byte
// budget: one per operation.
func WithReads(ctx context.Context, r *Reads) context.Context {
	return context.WithValue(ctx, readsKey{}, r)
}

// SingleRead tells the service that the operation in ctx makes at most
// one read: a loader would have nothing to batch, and handing the read to
// its goroutines costs more than the read (BenchmarkListItems). The read
// is made by the same function, in the caller's goroutine.
func SingleRead(ctx context.Context) {
	if r := readsFrom(ctx); r != nil {
		r.single.Store(true)
	}
}

func readsFrom(ctx context.Context) *Reads {
	r, _ := ctx.Value(readsKey{}).(*Reads)
	return r
}

// load makes one read for the operation in ctx, through its loader.
func (s *Service) load(ctx context.Context, k readKey) (readResult, error) {
	req := readsFrom(ctx)
	if req == nil || req.single.Load() {
		return s.read(ctx, req, k)
	}
	req.once.Do(func() {
		opts := []dataloader.Option[readKey, readResult]{
			dataloader.WithWait[readKey, readResult](s.loader.cfg.Wait),
			dataloader.WithBatchCapacity[readKey, readResult](s.loader.cfg.MaxBatch),
			// The channel that gathers a batch's keys; dataloader's 1,000
			// slots cost 8 KB per request.
			dataloader.WithInputCapacity[readKey, readResult](64),
		}
		if s.loader.tracer != nil {
			opts = append(opts, dataloader.WithTracer[readKey, readResult](s.loader.tracer))
		}
		req.loader = dataloader.NewBatchedLoader(s.loader.batch, opts...)
	})
	return req.loader.Load(ctx, k)()
}

// batch makes each read of a batch with its own single-partition query, at
// most Concurrency at once; never a multi-partition IN. Each key gets its
// own result, so one failing list fails only its field.
func (l *loader) batch(ctx context.Context, keys []readKey) []*dataloader.Result[readResult] {
	l.batchSize.Record(ctx, int64(len(keys)))
	req := readsFrom(ctx)
	results := make([]*dataloader.Result[readResult], len(keys))
	read := func(i int) {
		// Reads run in goroutines of their own, where a panic would end
		// the process: it fails the key instead.
		defer func() {
			if p := recover(); p != nil {
				results[i] = &dataloader.Result[readResult]{Error: l.onPanic(ctx, p)}
			}
		}()
		res, err := l.s.read(ctx, req, keys[i])
		results[i] = &dataloader.Result[readResult]{Data: res, Error: err}
	}
	// Even one key is read on a worker: the dataloader runs each batch on
	// a goroutine of its own, whose stack would grow for the read.
	l.s.workers.each(len(keys), l.cfg.Concurrency, read)
	return results
}

// read makes one read. Once the operation's response is full, its remaining
// reads are not made: they would only hold memory for fields that fail.
func (s *Service) read(ctx context.Context, req *Reads, k readKey) (res readResult, err error) {
	if req != nil && req.bytes.Load() > int64(s.limits.MaxResponseBytes) {
		return res, s.ResponseFull()
	}
	l := store.List{Feature: k.feature, EntityID: k.entityID}
	switch k.op {
	case readCount:
		res.count, err = s.store.Count(ctx, l, store.Window{MinTimestamp: k.r.MinTimestamp, MaxTimestamp: k.r.MaxTimestamp}, s.scanRows(req, k.feature))
	case readHistogram:
		b := store.Buckets{Window: store.Window{MinTimestamp: k.r.MinTimestamp, MaxTimestamp: k.r.MaxTimestamp}, Width: k.width}
		res.buckets, err = s.store.Histogram(ctx, l, b, s.scanRows(req, k.feature))
	case readFind:
		res.found, err = s.store.Find(ctx, l, splitValues(k.values), k.r.MinTimestamp, s.limits.MaxCount)
	default:
		// What the page may hold, and as much again for the answer it is
		// written into, is reserved before it is read; once it is, what
		// it holds is kept, until the answer is built (Settle).
		reserved := 2 * int64(k.r.Limit) * s.itemSizes.of(k.feature)
		if err := s.reserve(ctx, req, reserved); err != nil {
			return res, err
		}
		res.page, err = s.store.Items(ctx, l, k.r)
		if settled := s.settle(req, reserved, 2*s.itemSizes.learn(k.feature, res.page.Items)); err == nil {
			err = settled
		}
	}
	return res, err
}

// joinValues writes encoded values as one string, each after its length,
// so that a search's values can be part of a comparable read key.
func joinValues(vs [][]byte) string {
	n := 0
	for _, v := range vs {
		n += binary.MaxVarintLen64 + len(v)
	}
	b := make([]byte, 0, n)
	for _, v := range vs {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return string(b)
}

// splitValues reads what joinValues wrote.
func splitValues(s string) [][]byte {
	var out [][]byte
	for b := []byte(s); len(b) > 0; {
		n, w := binary.Uvarint(b)
		out = append(out, b[w:w+int(n)])
		b = b[w+int(n):]
	}
	return out
}
