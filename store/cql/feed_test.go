package cql_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
	"github.com/listgate/listgate/store/keys"
)

// cancelAfterBatch cancels a context once a batch has been executed: as a
// client that hangs up right after its add's items are written.
type cancelAfterBatch struct {
	next   gocql.BatchObserver
	cancel context.CancelFunc
}

func (o cancelAfterBatch) ObserveBatch(ctx context.Context, b gocql.ObservedBatch) {
	o.next.ObserveBatch(ctx, b)
	o.cancel()
}

// An add's record is written under a deadline of its own: a client that
// hangs up once the add's batch is written still leaves a record, and its
// items reach subscriptions, whether the record went in the batch (a small
// one) or beside it (one too large to share a batch).
func TestRecordOutlivesItsClient(t *testing.T) {
	for _, size := range []int{8, 4 << 10} {
		t.Run(fmt.Sprintf("%d bytes", size), func(t *testing.T) {
			ctx, hangUp := context.WithCancel(context.Background())
			defer hangUp()
			cfg := cqltest.Config(t)
			s, err := cql.OpenTuned(context.Background(), cfg, func(c *gocql.ClusterConfig) {
				c.BatchObserver = cancelAfterBatch{next: c.BatchObserver, cancel: hangUp}
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			f, err := s.CreateFeature(context.Background(), store.Feature{EntityType: "record_client", Name: fmt.Sprint("f", size), ValueType: store.String, TTL: time.Hour, Live: true})
			if err != nil {
				t.Fatal(err)
			}
			l := store.List{Feature: &f, EntityID: "u1"}
			head, err := store.AwaitHead(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			value := strings.Repeat("w", size)
			if _, err := s.AddItems(ctx, l, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte(value)}}); err != nil {
				t.Fatalf("the add whose client hung up after its batch: %v", err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for at := head; ; {
				changes, reached, err := s.ReadFeed(context.Background(), at, func(id store.ListID) bool { return id == l.ID() }, 1<<20)
				if err != nil {
					t.Fatal(err)
				}
				if len(changes) == 1 && string(changes[0].Items[0].Value) == value {
					return
				}
				if time.Now().After(deadline) {
					t.Fatal("no record of the add within 30 s")
				}
				at = reached
				if err := s.WaitFeed(context.Background(), at); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// countHeads counts the rows the feed's reads of record heads return.
type countHeads struct {
	next gocql.QueryObserver
	rows *atomic.Int64
}

func (o countHeads) ObserveQuery(ctx context.Context, q gocql.ObservedQuery) {
	o.next.ObserveQuery(ctx, q)
	if strings.HasPrefix(q.Statement, "SELECT id, feature_key, created_at, entity_id, bytes FROM") {
		o.rows.Add(int64(q.Rows))
	}
}

// A reader of the feed reads each record's head once, however often it
// polls: from where it stands to the settled end, never again.
func TestEachHeadIsReadOnce(t *testing.T) {
	var rows atomic.Int64
	cfg := cqltest.Config(t)
	cfg.Feed.Poll = 20 * time.Millisecond
	s, err := cql.OpenTuned(context.Background(), cfg, func(c *gocql.ClusterConfig) {
		c.QueryObserver = countHeads{next: c.QueryObserver, rows: &rows}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f, err := s.CreateFeature(context.Background(), store.Feature{EntityType: "heads_once", Name: "f", ValueType: store.String, TTL: time.Hour, Live: true})
	if err != nil {
		t.Fatal(err)
	}
	l := store.List{Feature: &f, EntityID: "u1"}
	ctx := context.Background()
	at, err := store.AwaitHead(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	const adds = 40
	go func() {
		for i := range adds {
			if _, err := s.AddItems(ctx, l, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte(fmt.Sprint(i))}}); err != nil {
				t.Error(err)
			}
		}
	}()
	read, polls := 0, 0
	deadline := time.Now().Add(time.Minute)
	for read < adds && time.Now().Before(deadline) {
		changes, reached, err := s.ReadFeed(ctx, at, func(store.ListID) bool { return true }, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		read, at, polls = read+len(changes), reached, polls+1
		if err := s.WaitFeed(ctx, at); err != nil {
			t.Fatal(err)
		}
	}
	if read != adds {
		t.Fatalf("read %d records of %d", read, adds)
	}
	if n := rows.Load(); n != adds {
		t.Fatalf("%d heads read for %d records in %d polls; want each once", n, adds, polls)
	}
}

// A record whose write the driver retried is written twice at one client
// timestamp, and its lists of keys and values, whose elements each write
// appends anew, hold every item twice: readers of the feed, and of a
// list's records, take each item once, in its order, with its own value.
func TestRecordWrittenTwiceIsReadOnce(t *testing.T) {
	cfg := cqltest.Config(t)
	s := cqltest.Open(t, cfg)
	session := rawSession(t, cfg)
	l := liveList(t, s, "retried")
	ctx := context.Background()
	head, err := store.AwaitHead(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	values := []string{"first", "second", "third"}
	stmt, args := s.RecordAt(l, time.Now(), values...)
	ts := time.Now().UnixMicro()
	for range 2 { // an attempt, then the driver's retry of it
		if err := session.Query(stmt, args...).WithTimestamp(ts).Exec(); err != nil {
			t.Fatal(err)
		}
	}
	check := func(how string, changes []store.Change) {
		t.Helper()
		if len(changes) != 1 {
			t.Fatalf("%s: %d records, want 1", how, len(changes))
		}
		var got []string
		for _, it := range changes[0].Items {
			got = append(got, string(it.Value))
			if it.Key != keys.ItemKey(it.Timestamp, it.Value) {
				t.Errorf("%s: the item %s came with the value %q", how, it.Key, it.Value)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(values) {
			t.Errorf("%s: the record's items are %q, want %q once each", how, got, values)
		}
	}
	check("ReadFeed", readAll(t, s, l, head, 30*time.Second))
	end, _, err := s.FeedHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var changes []store.Change
	for deadline := time.Now().Add(30 * time.Second); len(changes) == 0; {
		if changes, _, _, err = s.ListFeed(ctx, l, head, end, 1<<20); err != nil {
			t.Fatal(err)
		}
		if len(changes) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("ListFeed read no record within 30 s")
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	check("ListFeed", changes)
}

// slowRecords holds up, once on is set, every write of a change record:
// as a node that answers late (frozen, or behind a slow link) would.
type slowRecords struct {
	batches gocql.BatchObserver
	queries gocql.QueryObserver
	on      *atomic.Bool
	delay   time.Duration
}

func (o slowRecords) ObserveBatch(ctx context.Context, b gocql.ObservedBatch) {
	o.batches.ObserveBatch(ctx, b)
	if o.on.Load() && strings.Contains(strings.Join(b.Statements, ";"), "list_changes") {
		time.Sleep(o.delay)
	}
}

func (o slowRecords) ObserveQuery(ctx context.Context, q gocql.ObservedQuery) {
	o.queries.ObserveQuery(ctx, q)
	if o.on.Load() && strings.Contains(q.Statement, "INSERT INTO") && strings.Contains(q.Statement, "list_changes") {
		time.Sleep(o.delay)
	}
}

// A live add answers by its deadline, however long its record takes to
// write: the add fails (it may still be written, all of it), and the
// record, written under the gateway's lease whatever the client does,
// still reaches subscriptions; whether the record went in the add's batch
// (a small one) or beside it (one too large to share a batch).
func TestLiveAddAnswersByItsDeadline(t *testing.T) {
	for _, size := range []int{8, 4 << 10} {
		t.Run(fmt.Sprintf("%d bytes", size), func(t *testing.T) {
			cfg := cqltest.Config(t)
			on := &atomic.Bool{}
			s, err := cql.OpenTuned(context.Background(), cfg, func(c *gocql.ClusterConfig) {
				o := slowRecords{batches: c.BatchObserver, queries: c.QueryObserver, on: on, delay: 1500 * time.Millisecond}
				c.BatchObserver, c.QueryObserver = o, o
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			l := liveList(t, s, fmt.Sprint("deadline", size))
			head, err := store.AwaitHead(context.Background(), s)
			if err != nil {
				t.Fatal(err)
			}
			value := strings.Repeat("d", size)
			on.Store(true)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			began := time.Now()
			_, err = s.AddItems(ctx, l, []store.NewItem{{Timestamp: time.Now().UnixNano(), Value: []byte(value)}})
			took := time.Since(began)
			on.Store(false)
			if took > time.Second {
				t.Errorf("the add answered %v after it began, past its deadline of 300 ms (err %v)", took.Round(time.Millisecond), err)
			}
			if err == nil {
				t.Errorf("the add whose record was still being written at its deadline succeeded")
			}
			changes := readAll(t, s, l, head, 30*time.Second)
			if len(changes) != 1 || string(changes[0].Items[0].Value) != value {
				t.Fatalf("read %d records, want the add's", len(changes))
			}
		})
	}
}
