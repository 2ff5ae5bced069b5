package watch

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// poller polls one list for its subscriptions.
type poller struct {
	hub     *Hub
	key     string
	list    store.List
	ctx     context.Context // ends when the poller retires
	cancel  context.CancelFunc
	retired sync.Once
	ready   chan struct{} // closed once the first read is done, or failed (err)
	err     error

	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	newest int64           // the newest timestamp delivered, or the start
	least  int64           // the window starts no earlier: raised when seen is full
	seen   map[string]bool // keys delivered, or there at the start, from floor() on
}

// floor is where the window starts: items stamped earlier are never
// delivered.
func (p *poller) floor() int64 {
	return max(p.newest-int64(p.hub.cfg.Lateness), p.least, 0)
}

// newPoller makes the poller of a list, not yet started. Its polls carry
// no request's context: they are no one request's.
func (h *Hub) newPoller(key string, l store.List) *poller {
	ctx, cancel := context.WithCancel(context.Background())
	return &poller{hub: h, key: key, list: l, ctx: ctx, cancel: cancel, ready: make(chan struct{}),
		subs: map[*subscriber]struct{}{}, seen: map[string]bool{}, newest: h.cfg.Now().UnixNano()}
}

// start reads what the list holds in the window at the start, which is
// not new (it is marked seen), then polls. ctx bounds the first read.
func (p *poller) start(ctx context.Context) {
	h := p.hub
	defer close(p.ready)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	context.AfterFunc(p.ctx, stop) // retired before it started
	for {
		full, err := p.read(ctx, false)
		if err != nil {
			p.err = err
			p.cancel()
			return
		}
		if !full {
			break
		}
	}
	h.watched.Add(p.ctx, 1)
	h.running.Add(1)
	go func() {
		defer h.running.Done()
		p.run()
	}()
}

// run polls every interval until the poller retires. A poll that reads a
// full batch reads again at once, a few times.
func (p *poller) run() {
	t := time.NewTicker(p.hub.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
		}
		for range 10 {
			full, err := p.read(p.ctx, true)
			if err != nil {
				if p.ctx.Err() == nil {
					p.hub.cfg.Log.Warn("polling a watched list failed; the next poll retries", "feature", p.list.Feature.Key(), "err", err)
				}
				break
			}
			if !full {
				break
			}
		}
	}
}

// read reads the list from the window's start and takes the items it has
// not seen: delivered to every subscription, or, at the start, only
// marked seen. full reports a read of all it asked for: more may follow.
func (p *poller) read(ctx context.Context, deliver bool) (full bool, err error) {
	h := p.hub
	p.mu.Lock()
	from := keys.TimestampPrefix(p.floor())
	limit := len(p.seen) + h.cfg.Batch
	p.mu.Unlock()
	ctx, span := h.cfg.Tracer.Start(ctx, "watch.poll", trace.WithAttributes(
		attribute.String("listgate.feature.key", p.list.Feature.Key()), attribute.Int("listgate.poll.limit", limit)))
	defer span.End()
	items, err := h.cfg.Store.Since(ctx, p.list, from, limit)
	h.polls.Add(ctx, 1)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return false, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	floor, n := p.floor(), 0
	for _, it := range items { // oldest first
		if p.seen[it.Key] || it.Timestamp < floor {
			continue
		}
		p.seen[it.Key] = true
		p.newest = max(p.newest, it.Timestamp)
		if !deliver {
			continue
		}
		for sub := range p.subs {
			select {
			case sub.live <- it:
				n++
			default:
				p.end(sub, ErrTooSlow)
			}
		}
	}
	p.prune()
	span.SetAttributes(attribute.Int("listgate.poll.items", len(items)), attribute.Int("listgate.poll.delivered", n))
	h.delivered.Add(ctx, int64(n))
	return len(items) == limit, nil
}

// prune forgets the keys below the window, and, past maxSeen keys, the
// oldest, raising the window's start above them.
func (p *poller) prune() {
	floor := p.floor()
	for k := range p.seen {
		if keys.ItemTimestamp(k) < floor {
			delete(p.seen, k)
		}
	}
	if len(p.seen) <= maxSeen {
		return
	}
	all := slices.Sorted(maps.Keys(p.seen))
	for _, k := range all[:len(all)-maxSeen] {
		delete(p.seen, k)
	}
	p.least = keys.ItemTimestamp(all[len(all)-maxSeen])
}

// end ends one subscription; p.mu is held.
func (p *poller) end(sub *subscriber, err error) {
	if _, ok := p.subs[sub]; !ok {
		return
	}
	delete(p.subs, sub)
	sub.err = err
	close(sub.done)
}

// retire stops polling.
func (p *poller) retire() {
	p.retired.Do(func() {
		p.cancel()
		<-p.ready
		if p.err == nil {
			p.hub.watched.Add(context.Background(), -1)
		}
	})
}
