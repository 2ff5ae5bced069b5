package store

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Instrument wraps a store so that every list operation is timed and the
// items it reads, adds, finds expired and removes are counted, and so
// that the age of the oldest write under way is known (OldestWrite).
func Instrument(s Store, mp metric.MeterProvider) (*Instrumented, error) {
	meter := mp.Meter("github.com/listgate/listgate/store")
	in := &Instrumented{Store: s, outcomes: map[string][2]metric.MeasurementOption{}, writes: newWritesInFlight(time.Now())}
	counters := []struct {
		c    *metric.Int64Counter
		name string
		desc string
	}{
		{&in.read, "listgate.list.items.read", "Items returned by list reads."},
		{&in.added, "listgate.list.items.added", "Distinct items written by adds."},
		{&in.expired, "listgate.list.items.expired", "Items of adds that had already expired and were not written."},
		{&in.removed, "listgate.list.items.removed", "Items removed by removeListItemsWithValue(s)."},
	}
	var err error
	for _, c := range counters {
		if *c.c, err = meter.Int64Counter(c.name, metric.WithDescription(c.desc)); err != nil {
			return nil, err
		}
	}
	if in.features, err = newFeatureMetrics(meter); err != nil {
		return nil, err
	}
	if in.duration, err = meter.Float64Histogram("listgate.list.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of list operations on the store, by operation and outcome.")); err != nil {
		return nil, err
	}
	for _, op := range []string{"items", "count", "histogram", "find", "since", "add", "remove_values", "remove_all"} {
		in.outcomes[op] = [2]metric.MeasurementOption{
			metric.WithAttributeSet(attribute.NewSet(attribute.String("operation", op), attribute.String("outcome", "ok"))),
			metric.WithAttributeSet(attribute.NewSet(attribute.String("operation", op), attribute.String("outcome", "error"))),
		}
	}
	return in, nil
}

// Instrumented is a store whose list operations are measured.
type Instrumented struct {
	Store
	read, added, expired, removed metric.Int64Counter
	duration                      metric.Float64Histogram
	outcomes                      map[string][2]metric.MeasurementOption
	features                      *featureMetrics
	writes                        *writesInFlight
}

// OldestWrite is how long the oldest write under way (an add, a removal,
// a feature created or deleted) has been running; 0 when none is.
func (s *Instrumented) OldestWrite() time.Duration { return s.writes.oldest(time.Now()) }

// done records one operation op on the list l: its duration and outcome,
// and, by its feature, the operation and the items it added, read or
// removed.
func (s *Instrumented) done(ctx context.Context, op string, l List, items int, start time.Time, err error) {
	o := s.outcomes[op][0]
	if err != nil {
		o = s.outcomes[op][1]
	}
	s.duration.Record(ctx, time.Since(start).Seconds(), o)
	if l.Feature != nil {
		s.features.record(ctx, l.Feature.Key(), op, items, err)
	}
}

func (s *Instrumented) Items(ctx context.Context, l List, r Range) (Page, error) {
	start := time.Now()
	p, err := s.Store.Items(ctx, l, r)
	s.done(ctx, "items", l, len(p.Items), start, err)
	s.read.Add(ctx, int64(len(p.Items)))
	return p, err
}

func (s *Instrumented) AddItems(ctx context.Context, l List, items []NewItem) (AddResult, error) {
	start := time.Now()
	// begin runs now, end when the add returns, even by a panic a
	// resolver recovers from: a slot left taken would look stuck.
	defer s.writes.end(s.writes.begin(start))
	res, err := s.Store.AddItems(ctx, l, items)
	s.done(ctx, "add", l, res.Added, start, err)
	s.added.Add(ctx, int64(res.Added))
	s.expired.Add(ctx, int64(res.Expired))
	return res, err
}

func (s *Instrumented) Count(ctx context.Context, l List, w Window, maxRows int) (int, error) {
	start := time.Now()
	n, err := s.Store.Count(ctx, l, w, maxRows)
	s.done(ctx, "count", l, 0, start, err)
	return n, err
}

func (s *Instrumented) Histogram(ctx context.Context, l List, b Buckets, maxRows int) ([]int, error) {
	start := time.Now()
	counts, err := s.Store.Histogram(ctx, l, b, maxRows)
	s.done(ctx, "histogram", l, 0, start, err)
	return counts, err
}

func (s *Instrumented) Find(ctx context.Context, l List, values [][]byte, minTimestamp int64, maxRows int) ([]string, error) {
	start := time.Now()
	found, err := s.Store.Find(ctx, l, values, minTimestamp, maxRows)
	s.done(ctx, "find", l, 0, start, err)
	return found, err
}

func (s *Instrumented) Since(ctx context.Context, l List, from string, limit int) (SincePage, error) {
	start := time.Now()
	p, err := s.Store.Since(ctx, l, from, limit)
	s.done(ctx, "since", l, len(p.Items), start, err)
	s.read.Add(ctx, int64(len(p.Items)))
	return p, err
}

func (s *Instrumented) RemoveValues(ctx context.Context, l List, values [][]byte, w Window, maxRows int) (int, error) {
	start := time.Now()
	defer s.writes.end(s.writes.begin(start))
	n, err := s.Store.RemoveValues(ctx, l, values, w, maxRows)
	s.done(ctx, "remove_values", l, n, start, err)
	s.removed.Add(ctx, int64(n))
	return n, err
}

func (s *Instrumented) RemoveAll(ctx context.Context, l List) error {
	start := time.Now()
	defer s.writes.end(s.writes.begin(start))
	err := s.Store.RemoveAll(ctx, l)
	s.done(ctx, "remove_all", l, 0, start, err)
	return err
}

// CreateFeature and DeleteFeature are writes too: they are known to be
// under way, not timed.
func (s *Instrumented) CreateFeature(ctx context.Context, f Feature) (Feature, error) {
	defer s.writes.end(s.writes.begin(time.Now()))
	return s.Store.CreateFeature(ctx, f)
}

func (s *Instrumented) DeleteFeature(ctx context.Context, entityType, name, version string) (bool, error) {
	defer s.writes.end(s.writes.begin(time.Now()))
	return s.Store.DeleteFeature(ctx, entityType, name, version)
}

// RowMeter counts the rows backends read, by whether they carried values:
// listgate_list_rows_read_total{values="true"|"false"}. Rows read for
// their keys alone are cheap; rows read with values are what a read costs.
type RowMeter struct {
	c            metric.Int64Counter
	keys, values metric.AddOption
}

// NewRowMeter makes the counter; a nil *RowMeter counts nothing.
func NewRowMeter(mp metric.MeterProvider) (*RowMeter, error) {
	c, err := mp.Meter("github.com/listgate/listgate/store").Int64Counter("listgate.list.rows.read",
		metric.WithDescription("Rows the store read, by whether with their values (a read looks at keys first when it may leave rows out)."))
	if err != nil {
		return nil, err
	}
	return &RowMeter{c: c,
		keys:   metric.WithAttributeSet(attribute.NewSet(attribute.Bool("values", false))),
		values: metric.WithAttributeSet(attribute.NewSet(attribute.Bool("values", true)))}, nil
}

// Read counts n rows read, with their values or not.
func (m *RowMeter) Read(ctx context.Context, n int, values bool) {
	if m == nil || n == 0 {
		return
	}
	if values {
		m.c.Add(ctx, int64(n), m.values)
	} else {
		m.c.Add(ctx, int64(n), m.keys)
	}
}
