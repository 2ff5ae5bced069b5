package cql

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/errkind"
)

// The cluster's clock, as this gateway measures it.
//
// The change feed orders records by time UUIDs that gateways stamp, so
// gateways must read one clock, the cluster's, though each node's clock
// may be tens of milliseconds from the others'. Each gateway asks every
// node of the ring for its time (toTimestamp(now()), addressed to that
// node) every clockEvery. A sample bounds its node's clock by half its
// round trip and the half millisecond now() drops, and the bound widens
// as time passes by how fast two clocks may drift apart (maxDrift). A
// node's samples of the last sampleLife are intersected, which narrows
// its bound; samples that do not intersect mean its clock stepped, and
// only the newest counts. The cluster's time is the middle of the
// smallest range that holds every node's bound; its uncertainty, half the
// range, is how far any node's clock may be from this gateway's measure.
//
// Two gateways whose samples share a node are within the sum of their
// uncertainties of each other; samples of a majority of the ring's nodes
// make sure that any two share one. So the measure counts (usable) only
// while it covers a majority, and while its uncertainty is within half of
// MaxOffset: the bound every gateway states (--max-clock-offset), and what
// a subscription's head waits out for the gateways it cannot see. Past it
// new subscriptions are refused (errkind.ClockSkew); adds never are.
//
// Time elapsed is read from the monotonic clock, so a step of this
// machine's own wall clock changes nothing once the nodes are measured.

const (
	// maxDrift is how fast a node's clock and this gateway's monotonic
	// clock may drift apart, per second: TrueTime's bound, 200 µs a second.
	maxDrift = 200e-6
	// sampleLife is how long a sample bounds its node's clock, and
	// samplesKept how many of a node's are kept.
	sampleLife  = time.Minute
	samplesKept = 5
	// clockEvery is how often every node is measured, and clockWorkers how
	// many are measured at once.
	clockEvery   = 2 * time.Second
	clockWorkers = 8
	// DefaultMaxClockOffset is --max-clock-offset's default: node clocks
	// 100 ms apart, and the error of measuring them, are served.
	DefaultMaxClockOffset = 250 * time.Millisecond
)

// clock is the cluster's clock as this gateway measures it. Its measure
// is replaced whole (est); samples are guarded by mu, and only measure
// takes it.
type clock struct {
	mono      func() time.Time // read for time elapsed only; time.Now outside tests
	base      time.Time        // mono's reading when the clock was made
	baseWall  int64            // base's wall time, unix ns: this gateway's time is baseWall + time since base
	maxOffset time.Duration

	est atomic.Pointer[estimate] // the latest measure; nil before the first

	mu      sync.Mutex
	samples map[string][]sample // by node (host ID), oldest first
}

// newClock is a clock whose time elapses by mono, from wall, this
// gateway's time now.
func newClock(mono func() time.Time, wall time.Time, maxOffset time.Duration) *clock {
	return &clock{mono: mono, base: mono(), baseWall: wall.UnixNano(), maxOffset: maxOffset, samples: map[string][]sample{}}
}

// sample is one reading of a node's clock: at `at` (ns since base, the
// middle of its round trip) the node's clock read this gateway's time plus
// offset, give or take err.
type sample struct {
	at     int64
	offset int64
	err    int64
}

// bounds is what the sample says of the node's clock at `now` (ns since
// base): its offset lies within [lo, hi].
func (s sample) bounds(now int64) (lo, hi int64) {
	e := s.err + int64(float64(now-s.at)*maxDrift)
	return s.offset - e, s.offset + e
}

// estimate is a measure of the cluster's clock.
type estimate struct {
	at     int64 // ns since base, when made
	offset int64 // the cluster's time minus this gateway's, ns
	half   int64 // the uncertainty at `at`, ns
	nodes  int   // nodes whose samples count
	ring   int   // nodes in the ring
}

// since is the time elapsed since base, ns.
func (c *clock) since() int64 { return int64(c.mono().Sub(c.base)) }

// Now is the cluster's time, as measured; this gateway's own before the
// first measure.
func (c *clock) Now() time.Time {
	t := c.baseWall + c.since()
	if e := c.est.Load(); e != nil {
		t += e.offset
	}
	return time.Unix(0, t)
}

// Uncertainty is how far any node's clock may be from Now, and whether
// the measure counts: it covers a majority of the ring, within half of
// maxOffset.
func (c *clock) Uncertainty() (time.Duration, bool) {
	e := c.est.Load()
	if e == nil {
		return 0, false
	}
	u := time.Duration(e.half + int64(float64(c.since()-e.at)*maxDrift))
	return u, 2*e.nodes > e.ring && 2*u <= c.maxOffset
}

// Margin is how far another gateway's measure may be from this one's:
// this one's uncertainty, and half of maxOffset for the other's, which
// the stated bound holds. ClockSkew when this measure does not count.
func (c *clock) Margin() (time.Duration, error) {
	u, ok := c.Uncertainty()
	if !ok {
		return 0, c.skewError(u)
	}
	return u + c.maxOffset/2, nil
}

// skewError says why the measure does not count.
func (c *clock) skewError(u time.Duration) error {
	e := c.est.Load()
	switch {
	case e == nil:
		return fmt.Errorf("%w: this gateway has not yet measured the cluster's clocks; subscribe again in a few seconds", errkind.ClockSkew)
	case 2*e.nodes <= e.ring:
		return fmt.Errorf("%w: this gateway measured the clocks of %d of the cluster's %d nodes, not a majority, so it cannot bound how far its records' times are from other gateways'; subscribe again once the nodes answer", errkind.ClockSkew, e.nodes, e.ring)
	}
	return fmt.Errorf("%w: the cluster's node clocks are %v apart as this gateway measures them (with the error of measuring), past --max-clock-offset %v: adds through different gateways could be delivered out of their order or missed; subscribe again once the clocks agree (check NTP on the nodes)",
		errkind.ClockSkew, (2 * u).Round(time.Millisecond), c.maxOffset)
}

// measure asks every node of the ring for its time, at once (clockWorkers
// at a time), and makes a new estimate. It fails only when no node
// answers.
func (s *Store) measureClock(ctx context.Context) error {
	hosts := s.session.GetHosts()
	type reading struct {
		host string
		smp  sample
		err  error
	}
	readings := make(chan reading, len(hosts))
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(clockWorkers, len(hosts)) {
		wg.Go(func() {
			for id := range work {
				smp, err := s.sampleNode(ctx, id)
				readings <- reading{id, smp, err}
			}
		})
	}
	ids := make([]string, 0, len(hosts))
	for _, h := range hosts {
		ids = append(ids, h.HostID())
	}
	for _, id := range ids {
		work <- id
	}
	close(work)
	wg.Wait()
	close(readings)
	var got []reading
	var lastErr error
	for r := range readings {
		if r.err != nil {
			lastErr = r.err
			continue
		}
		got = append(got, r)
	}
	fresh := map[string]sample{}
	for _, r := range got {
		fresh[r.host] = r.smp
	}
	s.clock.update(ids, fresh)
	if len(got) == 0 && lastErr != nil {
		return lastErr
	}
	return nil
}

// sampleNode reads one node's clock.
func (s *Store) sampleNode(ctx context.Context, hostID string) (sample, error) {
	c := s.clock
	t0 := c.since()
	var server time.Time
	err := s.session.Query("SELECT toTimestamp(now()) FROM system.local").SetHostID(hostID).
		WithContext(ctx).Consistency(gocql.One).Idempotent(true).Scan(&server)
	t1 := c.since()
	if err != nil {
		return sample{}, classify("reading a node's clock", err)
	}
	mid := (t0 + t1) / 2
	// now() is truncated to the millisecond: the node's clock was in
	// [server, server+1ms) when it read it, somewhere in the round trip.
	const half = int64(time.Millisecond / 2)
	return sample{at: mid, offset: server.UnixNano() + half - (c.baseWall + mid), err: (t1-t0)/2 + half}, nil
}

// update adds the samples just taken and makes the estimate of the ring's
// nodes (ids): every node's samples of the last sampleLife count.
func (c *clock) update(ids []string, fresh map[string]sample) {
	now := c.since()
	c.mu.Lock()
	defer c.mu.Unlock()
	inRing := map[string]bool{}
	for _, id := range ids {
		inRing[id] = true
	}
	for id := range c.samples {
		if !inRing[id] {
			delete(c.samples, id) // left the ring
		}
	}
	e := estimate{at: now, ring: len(ids)}
	lo, hi := int64(0), int64(0)
	for _, id := range ids {
		kept := c.samples[id]
		if smp, ok := fresh[id]; ok {
			kept = append(kept, smp)
		}
		for len(kept) > 0 && (len(kept) > samplesKept || now-kept[0].at > int64(sampleLife)) {
			kept = kept[1:]
		}
		if len(kept) == 0 {
			delete(c.samples, id)
			continue
		}
		nlo, nhi, ok := intersect(kept, now)
		if !ok {
			// Its clock stepped: the samples before the newest no longer
			// bound it.
			kept = kept[len(kept)-1:]
			nlo, nhi = kept[0].bounds(now)
		}
		c.samples[id] = kept
		if e.nodes == 0 || nlo < lo {
			lo = nlo
		}
		if e.nodes == 0 || nhi > hi {
			hi = nhi
		}
		e.nodes++
	}
	if e.nodes == 0 {
		if prev := c.est.Load(); prev != nil {
			// Nothing bounds any node now: keep the offset, count nothing.
			e.offset, e.half = prev.offset, prev.half
			c.est.Store(&e)
		}
		return
	}
	e.offset, e.half = lo+(hi-lo)/2, (hi-lo)/2
	c.est.Store(&e)
}

// intersect is the bound of a node's clock at now that all its samples
// agree on, and false if they do not all agree.
func intersect(samples []sample, now int64) (lo, hi int64, ok bool) {
	lo, hi = samples[0].bounds(now)
	for _, s := range samples[1:] {
		l, h := s.bounds(now)
		lo, hi = max(lo, l), min(hi, h)
	}
	return lo, hi, lo <= hi
}

// runClock measures the clock every clockEvery until ctx ends.
func (s *Store) runClock(ctx context.Context) {
	t := time.NewTicker(clockEvery)
	defer t.Stop()
	failing := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.measureClock(ctx); err != nil && ctx.Err() == nil && time.Since(failing) > time.Minute {
				failing = time.Now()
				s.cfg.Log.Warn("measuring the cluster's clock failed (logged once a minute)", "err", err)
			}
		}
	}
}

// observeClock exports the measure: listgate_clock_offset_seconds,
// _uncertainty_seconds, _max_offset_seconds, _nodes and _usable.
func (s *Store) observeClock(meter metric.Meter) error {
	offset, err := meter.Float64ObservableGauge("listgate.clock.offset", metric.WithUnit("s"),
		metric.WithDescription("The cluster's clock minus this gateway's, as measured from every node's now(): the skew the change feed corrects."))
	if err != nil {
		return err
	}
	uncertainty, err := meter.Float64ObservableGauge("listgate.clock.uncertainty", metric.WithUnit("s"),
		metric.WithDescription("How far any node's clock may be from this gateway's measure of the cluster's: half the spread of the node clocks, with the error of measuring them. Past half of --max-clock-offset, subscriptions are refused."))
	if err != nil {
		return err
	}
	maxOffset, err := meter.Float64ObservableGauge("listgate.clock.max_offset", metric.WithUnit("s"),
		metric.WithDescription("--max-clock-offset: the spread of node clocks, measured, past which subscriptions are refused."))
	if err != nil {
		return err
	}
	nodes, err := meter.Int64ObservableGauge("listgate.clock.nodes",
		metric.WithDescription("Nodes whose clocks this gateway's measure covers; fewer than a majority of the ring, and subscriptions are refused."))
	if err != nil {
		return err
	}
	usable, err := meter.Int64ObservableGauge("listgate.clock.usable",
		metric.WithDescription("1 while this gateway's measure of the cluster's clock covers a majority of the nodes, within --max-clock-offset, else 0: it then refuses new subscriptions (CLOCK_SKEW)."))
	if err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveFloat64(maxOffset, s.clock.maxOffset.Seconds())
		u, ok := s.clock.Uncertainty()
		o.ObserveInt64(usable, int64(b2i(ok)))
		e := s.clock.est.Load()
		if e == nil {
			return nil
		}
		o.ObserveFloat64(offset, time.Duration(e.offset).Seconds())
		o.ObserveFloat64(uncertainty, u.Seconds())
		o.ObserveInt64(nodes, int64(e.nodes))
		return nil
	}, offset, uncertainty, maxOffset, nodes, usable)
	return err
}
