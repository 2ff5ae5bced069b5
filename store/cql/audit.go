package cql

import (
	"context"
	"sync"
	"time"

	"github.com/gocql/gocql"
)

// The audit of records that reach the feed behind its readers. A reader
// reads no further than the settled end, where every record before it
// has been written at the write consistency; with consistency levels
// that cover every reader (CheckFeedConsistency) it reads them all. A
// record written later than that (a coordinator that applied a write
// after its client gave up, a data centre that got it late) comes before
// where readers stand, and none of them delivers it. So every span of the
// feed this gateway reads is counted again once the settled end is
// auditAfter past it: records found then, and not at first, reached the
// table late (listgate_change_feed_late_records_total).

const (
	// auditAfter is how long after its read a span is counted again (the
	// store's own, which tests shorten); auditSpans bounds the spans
	// waiting, and auditPerRead those counted again at each read.
	auditAfter   = 10 * time.Second
	auditSpans   = 1024
	auditPerRead = 4
)

// lateAudit holds the spans read and not yet counted again. mu guards
// spans; nothing is called under it.
type lateAudit struct {
	after time.Duration // auditAfter, set at Open
	mu    sync.Mutex
	spans []auditSpan // oldest first
}

// auditSpan is the ticks after from up to to, and the records of them a
// read saw.
type auditSpan struct {
	from, to int64
	count    int
}

// add keeps a span read; the oldest go past auditSpans.
func (a *lateAudit) add(from, to int64, count int) {
	if to <= from {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.spans) == auditSpans {
		a.spans = a.spans[1:]
	}
	a.spans = append(a.spans, auditSpan{from, to, count})
}

// due takes the spans settled auditAfter before settled, at most
// auditPerRead.
func (a *lateAudit) due(settled int64) []auditSpan {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for n < len(a.spans) && n < auditPerRead && a.spans[n].to <= settled-durationTicks(a.after) {
		n++
	}
	due := append([]auditSpan(nil), a.spans[:n]...)
	a.spans = a.spans[n:]
	return due
}

// auditLate counts again the spans due, and counts and logs the records
// that came late. A count that fails is not tried again.
func (s *Store) auditLate(ctx context.Context, settled int64) {
	for _, sp := range s.audit.due(settled) {
		n, err := s.countRecords(ctx, sp.from, sp.to)
		if err != nil || n <= sp.count {
			continue
		}
		s.lateRecords.Add(ctx, int64(n-sp.count))
		if s.lateLogged.Swap(true) {
			continue
		}
		s.cfg.Log.Warn("change records reached the feed after readers had passed their time, and were not delivered: a record written later than the settled end (a write that timed out, applied late; a data centre or replica behind the reader's consistency level); see listgate_change_feed_late_records_total (logged once)",
			"records", n-sp.count, "from", timeOf(sp.from), "to", timeOf(sp.to))
	}
}

// countRecords counts the records of ticks after from up to to, in every
// shard.
func (s *Store) countRecords(ctx context.Context, from, to int64) (int, error) {
	n := 0
	for b := bucketOf(timeOf(from)); b <= bucketOf(timeOf(to)); b++ {
		for shard := range s.cfg.Feed.Shards {
			iter := s.iter(s.session.Query(s.stmt.selectChangeIDs, b, shard, uuidAt(from), uuidAt(to+1)).
				WithContext(ctx).Consistency(s.cfg.ReadConsistency).Idempotent(true).PageSize(5000))
			var id gocql.UUID
			for iter.Scan(&id) {
				if t := id.Timestamp(); t > from && t <= to {
					n++
				}
			}
			if err := iter.Close(); err != nil {
				return 0, classify("counting the change feed's records", err)
			}
		}
	}
	return n, nil
}
