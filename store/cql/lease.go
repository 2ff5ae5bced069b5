package cql

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/errkind"
)

// Where the feed is settled: closed times, published under leases.
//
// A reader must not read past a time while a record of that time or
// before may still be written. Each gateway that writes records says how
// far that is for it: it publishes, every leaseRenew, in
// list_change_writers, its closed time (every record it stamped before
// it is written, or its add failed) and the end of its lease. Records are
// stamped only under a lease, and a record's write is cut short when the
// lease it was stamped under ends, so once a writer's lease has ended
// (with the clock's margin) it holds back no reader. A reader settles at
// the lowest closed time of the leases that have not ended, and no later
// than its clock less the clock's margin (clock.Margin), which covers a
// writer it has not seen yet: one that takes a lease after the reader
// read them stamps its records after the reader's now, less the margin.
// That is CockroachDB's closed timestamps and Spanner's safe time: a slow
// record delays delivery until it is written, where a fixed window would
// have failed its add, and a write that fails holds nothing back.
//
// A record that fails may still reach the table later (a coordinator that
// applies it after the client gave up): its add failed, and the client's
// retry is recorded and delivered. ReadFeed counts records that reach the
// table behind readers (listgate_change_feed_late_records_total).

const (
	// leaseFor is how long a lease lasts unless renewed, leaseRenew how
	// often it is, and leaseIdle how long a gateway that records nothing
	// keeps its lease.
	leaseFor   = 2 * time.Second
	leaseRenew = 100 * time.Millisecond
	leaseIdle  = 10 * time.Second
	// leaseTTL is a lease row's TTL: only so that the rows of gateways
	// gone do not stay; an ended lease holds back no reader long before.
	leaseTTL = 60
)

// errLeaseEnded cuts short the writes of records stamped under a lease
// that ended.
var errLeaseEnded = errors.New("this gateway's lease of the change feed ended before the record was written")

// feedWriter is this gateway as a writer of the change feed: its stamps,
// its records in flight, and its lease. mu guards every field after it;
// nothing is called under it but this file's own code and the clock's
// lock-free reads.
type feedWriter struct {
	id   gocql.UUID // this process's, random
	node [8]byte    // the clock sequence and node of its time UUIDs, random

	mu        sync.Mutex
	last      int64              // the latest stamp given, in ticks
	floor     int64              // stamps come after it: heads handed out, closed times published
	inflight  map[int64]struct{} // stamps of records not yet written, nor given up
	lease     *lease             // nil: none held
	used      int64              // clock.since() of the latest stamp
	acquiring chan struct{}      // closed when the lease being taken is taken, or not
}

// lease is a lease held: records stamped under it are cut short when it
// ends (ctx).
type lease struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer // ends it, unless renewed
}

func newFeedWriter() (*feedWriter, error) {
	w := &feedWriter{inflight: map[int64]struct{}{}}
	if _, err := rand.Read(w.node[:]); err != nil {
		return nil, err
	}
	w.node[0] = w.node[0]&0x3f | 0x80 // the RFC 4122 variant
	w.node[2] |= 0x01                 // the multicast bit: a random node, no machine's address
	id, err := gocql.RandomUUID()
	w.id = id
	return w, err
}

// timeUUID is the time UUID of a tick (100 ns since the UUID epoch) with
// this writer's clock sequence and node.
func (w *feedWriter) timeUUID(tick int64) gocql.UUID {
	var u gocql.UUID
	t := uint64(tick)
	binary.BigEndian.PutUint32(u[0:], uint32(t))
	binary.BigEndian.PutUint16(u[4:], uint16(t>>32))
	binary.BigEndian.PutUint16(u[6:], uint16(t>>48)&0x0fff|0x1000) // version 1
	copy(u[8:], w.node[:])
	return u
}

// next is the earliest stamp that may be given now; w.mu is held.
func (w *feedWriter) next(now int64) int64 { return max(now, w.last+1, w.floor+1) }

// holdAbove makes every later stamp come after tick t: a head handed out.
func (w *feedWriter) holdAbove(t int64) {
	w.mu.Lock()
	w.floor = max(w.floor, t)
	w.mu.Unlock()
}

// stamp is a record's time: after every stamp before it and every head
// handed out, taken under a lease held (taking one if none is, which
// writes it), and in flight until done is called. ctx is the record's
// write's: it ends with the lease, whatever the add's client does.
func (s *Store) stamp(ctx context.Context) (tick int64, rctx context.Context, done func(), err error) {
	w := s.writer
	for {
		w.mu.Lock()
		if l := w.lease; l != nil && l.ctx.Err() == nil {
			now := s.clock.since()
			tick = w.next(ticks(s.clock.Now()))
			w.last, w.used = tick, now
			w.inflight[tick] = struct{}{}
			w.mu.Unlock()
			rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
			stop := context.AfterFunc(l.ctx, func() { cancel(errLeaseEnded) })
			return tick, rctx, func() {
				stop()
				cancel(nil)
				w.mu.Lock()
				delete(w.inflight, tick)
				w.mu.Unlock()
			}, nil
		}
		if w.acquiring != nil {
			wait := w.acquiring
			w.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return 0, nil, nil, context.Cause(ctx)
			}
		}
		w.acquiring = make(chan struct{})
		w.mu.Unlock()
		err := s.acquire(ctx)
		w.mu.Lock()
		close(w.acquiring)
		w.acquiring = nil
		w.mu.Unlock()
		if err != nil {
			return 0, nil, nil, fmt.Errorf("%w: the record of the add that live subscriptions follow could not be written: this gateway could not take its lease of the change feed; retry: %v",
				errkind.Unavailable, err)
		}
	}
}

// acquire takes a lease: publishes this gateway's closed time, the next
// stamp it may give, and the lease's end, and once that is written
// starts stamping under it.
func (s *Store) acquire(ctx context.Context) error {
	w := s.writer
	sent := s.clock.since()
	now := ticks(s.clock.Now())
	w.mu.Lock()
	closed := w.next(now)
	w.floor = max(w.floor, closed-1)
	w.mu.Unlock()
	if err := s.publish(ctx, closed, now); err != nil {
		return err
	}
	lctx, cancel := context.WithCancelCause(context.Background())
	l := &lease{ctx: lctx, cancel: cancel}
	w.mu.Lock()
	defer w.mu.Unlock()
	l.timer = time.AfterFunc(s.leaseLeft(sent), func() { w.end(l) })
	w.lease, w.used = l, s.clock.since()
	return nil
}

// leaseLeft is how long a lease published at sent (clock.since) lasts
// from now, less a quarter for the writes cut short to end before
// readers stop waiting for them.
func (s *Store) leaseLeft(sent int64) time.Duration {
	return time.Duration(sent-s.clock.since()) + leaseFor*3/4
}

// end ends a lease, unless it was renewed meanwhile.
func (w *feedWriter) end(l *lease) {
	w.mu.Lock()
	if w.lease == l {
		w.lease = nil
	}
	w.mu.Unlock()
	l.cancel(errLeaseEnded)
}

// publish writes this gateway's closed time and the end of a lease that
// begins at now (ticks). It is speculated as a read is: one renewal that
// waits for a node that does not answer would hold every reader back, and
// end the lease, cutting the records in flight short. Each attempt writes
// the same row and values; the renewal after is sent once it has
// answered, later.
func (s *Store) publish(ctx context.Context, closed, now int64) error {
	expires := now + int64(leaseFor/100)
	err := s.execSpeculated(s.session.Query(s.stmt.publishWriter, s.writer.id, closed, expires, leaseTTL).WithContext(ctx).
		Consistency(s.feedWrite).Idempotent(true))
	return classify("publishing this gateway's closed time of the change feed", err)
}

// runLease renews the lease held every leaseRenew, publishing the closed
// time, and lets it go once no record has been stamped for leaseIdle.
func (s *Store) runLease(ctx context.Context) {
	w := s.writer
	t := time.NewTicker(leaseRenew)
	defer t.Stop()
	failing := time.Time{}
	for {
		select {
		case <-ctx.Done():
			w.mu.Lock()
			l := w.lease
			w.lease = nil
			w.mu.Unlock()
			s.release(l)
			return
		case <-t.C:
		}
		sent := s.clock.since()
		now := ticks(s.clock.Now())
		w.mu.Lock()
		l := w.lease
		if l == nil || l.ctx.Err() != nil {
			w.mu.Unlock()
			continue
		}
		if len(w.inflight) == 0 && sent-w.used > int64(leaseIdle) {
			w.lease = nil // under the lock that stamps take: none is in flight
			w.mu.Unlock()
			s.release(l)
			continue
		}
		closed := w.next(now)
		for t := range w.inflight {
			closed = min(closed, t)
		}
		w.floor = max(w.floor, closed-1)
		w.mu.Unlock()
		if err := s.publish(ctx, closed, now); err != nil {
			if ctx.Err() == nil && time.Since(failing) > time.Minute {
				failing = time.Now()
				s.cfg.Log.Warn("renewing this gateway's lease of the change feed failed; live adds fail once it ends (logged once a minute)", "err", err)
			}
			continue
		}
		w.mu.Lock()
		if w.lease == l && l.timer.Stop() {
			l.timer.Reset(s.leaseLeft(sent))
		}
		w.mu.Unlock()
	}
}

// release lets go of a lease no longer held (nil: none), which no stamp
// can take any more: its row goes, so that readers stop waiting on it at
// once.
func (s *Store) release(l *lease) {
	w := s.writer
	if l == nil {
		return
	}
	l.timer.Stop()
	l.cancel(errLeaseEnded)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
	defer cancel()
	if err := s.session.Query(s.stmt.releaseWriter, w.id).WithContext(ctx).Consistency(s.feedWrite).Idempotent(true).Exec(); err != nil {
		s.cfg.Log.Warn("letting go of this gateway's lease of the change feed failed; readers wait for it to end", "err", err)
	}
}

// settled is the feed's settled end now, in ticks: the lowest closed time
// of the leases that have not ended, and no later than this gateway's
// clock less its margin; never earlier than one it said before. Read
// once per half poll at most.
func (s *Store) settled(ctx context.Context) (int64, error) {
	if at, t := s.settledAt.Load(), s.settledTick.Load(); at != 0 && s.clock.since()-at < int64(s.cfg.Feed.Poll/2) {
		return t, nil
	}
	asked := s.clock.since()
	margin := s.clock.maxOffset
	if u, _ := s.clock.Uncertainty(); s.clock.est.Load() != nil {
		margin = u + s.clock.maxOffset/2
	}
	iter := s.iter(s.session.Query(s.stmt.selectWriters).WithContext(ctx).Consistency(s.cfg.ReadConsistency).Idempotent(true))
	now := ticks(s.clock.Now())
	end := now - int64(margin/100)
	var (
		writer           gocql.UUID
		closed, expires  int64
		holding, expired int
	)
	for iter.Scan(&writer, &closed, &expires) {
		if expires+int64(margin/100) < now {
			expired++
			continue
		}
		holding++
		end = min(end, closed-1)
	}
	if err := iter.Close(); err != nil {
		return 0, classify("reading the change feed's writers", err)
	}
	end = maxInt64(&s.settledTick, end)
	s.settledAt.Store(asked)
	return end, nil
}

// maxInt64 raises v to at least x, and returns v.
func maxInt64(v *atomic.Int64, x int64) int64 {
	for {
		old := v.Load()
		if x <= old || v.CompareAndSwap(old, x) {
			return max(old, x)
		}
	}
}
