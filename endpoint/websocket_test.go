package endpoint

import (
	"context"
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
