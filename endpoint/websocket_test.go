package endpoint

import (
	"context"
	"errors"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/metric/noop"
)

// Subscriptions and WebSockets that begin while the gateway shuts down are
// refused, never added to what shutdown waits for: a WaitGroup added to
// while its Wait returns panics.
func TestNothingBeginsOnceShutdownWaits(t *testing.T) {
	for range 50 {
		s, err := newSockets(Subscriptions{}.withDefaults(), noop.NewMeterProvider().Meter(""))
		if err != nil {
			t.Fatal(err)
		}
		var clients sync.WaitGroup
		for range 4 {
			clients.Go(func() {
				for s.begin(&s.streams) {
					s.streams.Done()
				}
			})
		}
		s.shutdown(context.Background(), func() {})
		clients.Wait()
		if s.begin(&s.streams) || s.begin(&s.conns) {
			t.Fatal("a subscription or a WebSocket began after shutdown")
		}
	}
}

// When every slot for WebSockets before their connection_init is held, a
// new one takes the place of the one that has waited longest, its
// client's own if it has one waiting.
func TestPendingWebSocketsShedTheOldest(t *testing.T) {
	s, err := newSockets(Subscriptions{MaxPending: 3, MaxPendingPerAddress: 3}.withDefaults(), noop.NewMeterProvider().Meter(""))
	if err != nil {
		t.Fatal(err)
	}
	take := func(client string) *pendingSocket {
		t.Helper()
		p, status, _, err := s.takePending(context.Background(), client)
		if err != nil {
			t.Fatalf("a pending WebSocket of %s: %d %v", client, status, err)
		}
		return p
	}
	a1, b1, a2 := take("a"), take("b"), take("a")
	shed := func(p *pendingSocket) bool { return errors.Is(context.Cause(p.ctx), errShed) }
	c1 := take("c") // c has none waiting: the oldest of all goes
	if !shed(a1) || shed(b1) || shed(a2) {
		t.Fatalf("c's WebSocket shed a1 %v, b1 %v, a2 %v; want a1 alone", shed(a1), shed(b1), shed(a2))
	}
	take("a") // a's own oldest goes, not b's older one
	if shed(b1) || !shed(a2) || shed(c1) {
		t.Fatalf("a's WebSocket shed b1 %v, a2 %v, c1 %v; want a2 alone", shed(b1), shed(a2), shed(c1))
	}
	s.leavePending(a1) // shed already: nothing more to give back
	s.leavePending(b1)
	take("d") // in b1's place: nothing is shed
	if shed(c1) {
		t.Fatal("a WebSocket was shed while a slot was free")
	}
}
