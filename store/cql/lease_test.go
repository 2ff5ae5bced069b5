package cql_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gocql/gocql"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
)

// tickOf is a time as the change feed's lease rows count it: 100 ns since
// the UUID epoch.
func tickOf(t time.Time) int64 { return t.UnixNano()/100 + 122192928000000000 }

// publishLease writes a lease row of a gateway the test plays: its closed
// time and the end of its lease.
func publishLease(t *testing.T, session *gocql.Session, ks string, writer gocql.UUID, closed, expires time.Time) {
	t.Helper()
	err := session.Query("INSERT INTO "+ks+".list_change_writers (feed, writer, closed, expires) VALUES (0, ?, ?, ?) USING TTL 60",
		writer, tickOf(closed), tickOf(expires)).Exec()
	if err != nil {
		t.Fatal(err)
	}
}

// liveList creates a live feature of its own and names a list of it.
func liveList(t *testing.T, s store.Store, name string) store.List {
	t.Helper()
	f, err := s.CreateFeature(context.Background(), store.Feature{EntityType: "lease", Name: fmt.Sprintf("%s%d", name, time.Now().UnixNano()%1e9), ValueType: store.String, TTL: time.Hour, Live: true})
	if err != nil {
		t.Fatal(err)
	}
	return store.List{Feature: &f, EntityID: "u1"}
}

// readAll reads the feed after `after` until a record of l comes, or
// fails the test past within.
func readAll(t *testing.T, s *cql.Store, l store.List, after store.Position, within time.Duration) []store.Change {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(within)
	for {
		changes, reached, err := s.ReadFeed(ctx, after, func(id store.ListID) bool { return id == l.ID() }, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if len(changes) > 0 {
			return changes
		}
		if time.Now().After(deadline) {
			t.Fatalf("no record of %s within %v", l.Feature.Key(), within)
		}
		after = reached
		if err := s.WaitFeed(ctx, after); err != nil {
			t.Fatal(err)
		}
	}
}

// A gateway whose record is slow to be written holds readers back until
// it is written, and its add is delivered: the record, written 3 s after
// its time, is read. Readers pass a
// lease only once it has ended, with the clock's margin.
func TestSlowRecordHoldsReadersBack(t *testing.T) {
	cfg := cqltest.Config(t)
	reader := cqltest.Open(t, cfg)
	session := rawSession(t, cfg)
	ctx := context.Background()
	l := liveList(t, reader, "slow")
	head, err := store.AwaitHead(ctx, reader)
	if err != nil {
		t.Fatal(err)
	}
	writer := gocql.MustRandomUUID()
	at := time.Now()
	renew := time.NewTicker(100 * time.Millisecond) // as a gateway renews its lease
	defer renew.Stop()
	for end := at.Add(3 * time.Second); time.Now().Before(end); <-renew.C {
		// The slow gateway renews its lease: its record of `at` is in flight.
		publishLease(t, session, cfg.Keyspace, writer, at, time.Now().Add(2*time.Second))
		settled, err := reader.Settled(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !settled.Before(at) {
			t.Fatalf("settled at %v, past the record in flight at %v", settled, at)
		}
	}
	stmt, args := reader.RecordAt(l, at, "slow")
	if err := session.Query(stmt, args...).Exec(); err != nil {
		t.Fatal(err)
	}
	publishLease(t, session, cfg.Keyspace, writer, time.Now(), time.Now().Add(2*time.Second))
	changes := readAll(t, reader, l, head, 30*time.Second)
	if len(changes) != 1 || string(changes[0].Items[0].Value) != "slow" {
		t.Fatalf("read %+v, want the slow record", changes)
	}

	// A lease that is not renewed holds readers back no longer than its
	// end and the clock's margin.
	stalled := time.Now()
	publishLease(t, session, cfg.Keyspace, gocql.MustRandomUUID(), stalled, stalled.Add(time.Second))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		settled, err := reader.Settled(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if settled.After(stalled) {
			if passed := time.Since(stalled); passed < time.Second {
				t.Fatalf("settled past a lease %v before its end", time.Second-passed)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still settled at %v, 30 s after a lease of 1 s began", settled)
		}
	}
}

// A gateway's stamps never fall below a head it handed out, even once its
// measure of the cluster's clock steps back: a record of an add begun
// after the head comes after it.
func TestStampsStayAboveHeads(t *testing.T) {
	cfg := cqltest.Config(t)
	s := cqltest.Open(t, cfg)
	ctx := context.Background()
	l := liveList(t, s, "heads")
	head, err := store.AwaitHead(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	s.ShiftClock(-time.Second)
	if _, err := s.AddItems(ctx, l, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte("after")}}); err != nil {
		t.Fatal(err)
	}
	s.ShiftClock(time.Second) // so that the feed settles past the record in this test's time
	changes := readAll(t, s, l, head, 30*time.Second)
	if len(changes) != 1 || !head.Less(changes[0].After(0)) {
		t.Fatalf("read %+v after the head %v; want the add's record, after it", changes, head)
	}
}

// A record that reaches the table after readers have passed its time is
// counted, once its span is counted again.
func TestLateRecordsAreCounted(t *testing.T) {
	cfg := cqltest.Config(t)
	reader := sdkmetric.NewManualReader()
	cfg.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	s := cqltest.Open(t, cfg)
	s.SetAuditAfter(time.Second)
	session := rawSession(t, cfg)
	ctx := context.Background()
	l := liveList(t, s, "late")
	at, err := store.AwaitHead(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	late := func() int64 {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "listgate.change_feed.late_records" {
					return sum.DataPoints[0].Value
				}
			}
		}
		return -1
	}
	written := false
	for deadline := time.Now().Add(60 * time.Second); late() < 1; {
		_, reached, err := s.ReadFeed(ctx, at, func(store.ListID) bool { return true }, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		at = reached
		if settled, _ := s.PositionTime(at); !written && settled.After(began.Add(500*time.Millisecond)) {
			// Readers have passed `began`: a record of then comes late.
			stmt, args := s.RecordAt(l, began.Add(100*time.Millisecond), "late")
			if err := session.Query(stmt, args...).Exec(); err != nil {
				t.Fatal(err)
			}
			written = true
		}
		if time.Now().After(deadline) {
			t.Fatalf("late records counted: %d, 60 s after one was written behind the readers (written: %v)", late(), written)
		}
		if err := s.WaitFeed(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	if n := late(); n != 1 {
		t.Fatalf("late records counted: %d, want 1", n)
	}
}

// A read of the feed holds a bounded number of record heads, however many
// records its span holds and however many buckets it crosses, and the
// next read goes on from where it stopped: a catch-up through 100 records
// of other lists in its shard, half of them in the next bucket, looks at
// no more than the bound a page, and finds its list's record.
func TestFeedReadsHoldBoundedHeads(t *testing.T) {
	cfg := cqltest.Config(t)
	cfg.Feed.Shards = 1 // every list's records in one partition
	s := cqltest.Open(t, cfg)
	s.SetHeadsPerRead(16)
	ctx := context.Background()
	l := liveList(t, s, "bounded")
	// Begin 2.5 s before a bucket ends, so that the records cross it.
	width := cql.BucketWidth
	end := time.Now().Add(2 * time.Second).Truncate(width).Add(width)
	<-time.After(time.Until(end.Add(-2500 * time.Millisecond)))
	head, err := store.AwaitHead(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if i == 50 {
			<-time.After(time.Until(end.Add(100 * time.Millisecond)))
		}
		other := store.List{Feature: l.Feature, EntityID: fmt.Sprint("other", i)}
		if _, err := s.AddItems(ctx, other, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte("x")}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.AddItems(ctx, l, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte("mine")}}); err != nil {
		t.Fatal(err)
	}
	last := readAll(t, s, l, head, 30*time.Second)[0].After(0)
	at, pages, looked := head, 0, 0
	for deadline := time.Now().Add(30 * time.Second); ; pages++ {
		changes, reached, n, err := s.ListFeed(ctx, l, at, last, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if n > 16 {
			t.Fatalf("a page looked at %d heads, past the bound of 16", n)
		}
		looked += n
		if len(changes) > 0 {
			if string(changes[0].Items[0].Value) != "mine" {
				t.Fatalf("read %q, want mine", changes[0].Items[0].Value)
			}
			break
		}
		if !at.Less(reached) || time.Now().After(deadline) {
			t.Fatalf("page %d: no progress from %v (reached %v)", pages, at, reached)
		}
		at = reached
	}
	if pages < 100/16 || looked < 100 {
		t.Fatalf("%d pages looked at %d heads; want the 100 records of other lists looked at, 16 at most a page", pages, looked)
	}
}
