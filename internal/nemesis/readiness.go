package nemesis

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// sample is one answer of a gateway's /readyz.
type sample struct {
	Gateway string
	At      time.Time // when it was asked
	Status  int       // 0: no answer (the gateway down, or past the poll's timeout)
	Took    time.Duration
}

// readiness asks every gateway's /readyz every readyEvery.
type readiness struct {
	mu      sync.Mutex
	samples []sample
}

const readyEvery = 250 * time.Millisecond

func (r *readiness) poll(ctx context.Context, g *Gateway) {
	client := &http.Client{Timeout: 3 * time.Second}
	for ctx.Err() == nil {
		began := time.Now()
		s := sample{Gateway: g.Name, At: began}
		if base := g.Base(); base != "" {
			if resp, err := client.Get(base + "/readyz"); err == nil {
				resp.Body.Close()
				s.Status = resp.StatusCode
			}
			s.Took = time.Since(began)
			r.mu.Lock()
			r.samples = append(r.samples, s)
			r.mu.Unlock()
		}
		sleep(ctx, readyEvery-time.Since(began))
	}
}

func (r *readiness) snapshot() []sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sample(nil), r.samples...)
}
