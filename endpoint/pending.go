package endpoint

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/pool"
)

// A WebSocket whose upgrade carried no Authorization holds, until its
// connection_init, a slot of a small pool of its own
// (--max-pending-websockets), of which one client holds at most
// --max-pending-websockets-per-address: until it authenticates, its
// client's address (clients.go) is all that is known of it. When the pool
// is full, a new WebSocket takes the place of the one that has waited
// longest, its client's own if it has one waiting: a client sends its
// connection_init within a round trip of its upgrade, so the one that has
// waited longest is the likeliest never to, and whoever fills the pool
// keeps nobody else out for longer than that.

// pendingSocket is a WebSocket's slot among those before their
// connection_init.
type pendingSocket struct {
	slot   *pool.Hold
	client string
	// ctx ends with errShed when the WebSocket is shed; its connection
	// then closes it.
	ctx  context.Context
	shed context.CancelCauseFunc
	elem *list.Element // in sockets.waiting, nil once out of it; guarded by sockets.mu
}

// errShed is why a pending WebSocket was closed for a new one.
var errShed = errors.New("shed for a newer WebSocket")

// takePending takes a slot for a WebSocket of client that has not sent its
// connection_init, in the place of the one that has waited longest when
// they are all held; or says why it cannot: the client holds its share
// (429), or no WebSocket waits to give its place (503).
func (s *sockets) takePending(ctx context.Context, client string) (*pendingSocket, int, metric.AddOption, error) {
	for {
		slot, err := s.pending.Take("addr:"+client, 1)
		switch {
		case err == nil:
			p := &pendingSocket{slot: slot, client: client}
			p.ctx, p.shed = context.WithCancelCause(context.Background())
			s.mu.Lock()
			p.elem = s.waiting.PushBack(p)
			s.mu.Unlock()
			return p, 0, nil, nil
		case errors.Is(err, pool.ErrShare):
			s.h.callers.Shared(ctx, "addr:"+client)
			return nil, http.StatusTooManyRequests, refusedPendingAddr,
				fmt.Errorf("%w: this address holds its share of the WebSockets that have not sent their connection_init (%d, --max-pending-websockets-per-address; less while other addresses hold the rest); retry", errkind.Throttled, s.pending.Share())
		}
		if !s.shedOldest(ctx, client) {
			return nil, http.StatusServiceUnavailable, refusedPending,
				fmt.Errorf("%w: %d WebSockets have not sent their connection_init (--max-pending-websockets); retry", errkind.Refused, s.pending.Size())
		}
	}
}

// shedOldest sheds the WebSocket that has waited longest for its
// connection_init, client's own if it has one waiting: its slot is given
// back at once, and its connection closes it. It reports false when none
// waits.
func (s *sockets) shedOldest(ctx context.Context, client string) bool {
	s.mu.Lock()
	oldest := s.waiting.Front()
	for e := oldest; e != nil; e = e.Next() {
		if e.Value.(*pendingSocket).client == client {
			oldest = e
			break
		}
	}
	var p *pendingSocket
	if oldest != nil {
		p = s.waiting.Remove(oldest).(*pendingSocket)
		p.elem = nil
	}
	s.mu.Unlock()
	if p == nil {
		return false
	}
	p.slot.Release()
	p.shed(errShed)
	s.refused.Add(ctx, 1, refusedPending)
	return true
}

// leavePending gives back the slot of a WebSocket that sent its
// connection_init, or ended before; nothing when p is nil or was shed.
func (s *sockets) leavePending(p *pendingSocket) {
	if p == nil {
		return
	}
	s.mu.Lock()
	if p.elem != nil {
		s.waiting.Remove(p.elem)
		p.elem = nil
	}
	s.mu.Unlock()
	p.slot.Release()
}
