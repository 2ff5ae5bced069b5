package cql_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/internal/cqltest"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
)

// A node that goes away is connected again once it is back, and while it
// is away the driver keeps its pool: each failed attempt to connect it
// again no longer removes the pool. gocql removed it on every failure, and
// a fill that had connected once before failing could mark the host up
// after the removal, leaving it up with no pool, which nothing made again
// (seen once: every statement failed "no hosts available in the pool" for
// a minute after a one-node cluster restarted). The node goes away by its
// connections: the dialer cuts them and refuses new ones.
func TestANodeBackIsConnectedAgain(t *testing.T) {
	ctx := context.Background()
	cfg := cqltest.Config(t)
	cfg.Timeout = 2 * time.Second
	gate := &gate{}
	s, err := cql.OpenTuned(ctx, cfg, func(c *gocql.ClusterConfig) { c.Dialer = gate })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: fmt.Sprintf("rc%d", time.Now().UnixNano()%1e12), Name: "history", ValueType: store.String, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	l := store.List{Feature: &f, EntityID: "u1"}
	read := func() error {
		_, err := s.Items(ctx, l, store.Range{Limit: 1})
		return err
	}
	if err := read(); err != nil {
		t.Fatal(err)
	}
	// every says whether each host the driver knows is up (or down) and
	// pooled (or not), as want says; the hosts are the cluster's, however
	// the test names them.
	every := func(up, pooled bool) bool {
		hosts := s.HostPools()
		for _, st := range hosts {
			if st != [2]bool{up, pooled} {
				return false
			}
		}
		return len(hosts) > 0
	}

	gate.close(true)
	waitFor(t, 30*time.Second, "the driver counts every node down", func() bool {
		for _, st := range s.HostPools() {
			if st[0] {
				return false
			}
		}
		return true
	})
	// Counted down, a node's pool is removed; the reconnect loop (once a
	// second) makes one again, and through the next rounds, each failing,
	// it stays.
	waitFor(t, 30*time.Second, "the reconnect loop makes each node's pool again", func() bool { return every(false, true) })
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if !every(false, true) {
			t.Fatalf("nodes away: %v (up, pooled) by address; want each down, with its pool kept", s.HostPools())
		}
	}
	if err := read(); err == nil {
		t.Fatal("a read succeeded while the nodes were away")
	}

	gate.close(false)
	waitFor(t, 30*time.Second, "a read succeeds once the nodes are back", func() bool { return read() == nil })
	waitFor(t, 30*time.Second, "every node up with its pool", func() bool { return every(true, true) })
}

// gate dials as net.Dialer does while open; closed, it has cut every
// connection it made and refuses new ones.
type gate struct {
	mu     sync.Mutex
	closed bool
	conns  []net.Conn
}

func (g *gate) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("connection refused (test gate closed)")}
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		g.conns = append(g.conns, c)
	}
	return c, err
}

func (g *gate) close(closed bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = closed
	if closed {
		for _, c := range g.conns {
			c.Close()
		}
		g.conns = nil
	}
}

func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
	}
}
