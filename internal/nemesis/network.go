package nemesis

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Network is what joins the cluster's nodes to each other and to the
// gateways: a TCP proxy in front of each node's storage and CQL ports,
// which every other process reaches the node through (the node's
// broadcast address). It tells who connects by the process holding the
// other end of the connection (owner.go), and applies the faults of the
// links: cut (nothing passes either way, new connections wait, as behind
// a partition that drops packets), and slow (latency, jitter and loss,
// as TCP shows loss to the application: a segment held back a
// retransmission timeout). A proxy needs no privilege, no kernel module
// and touches no one else's traffic, which iptables or tc on a shared
// loopback would.
//
// Concurrency: mu guards the rules and the owners; changed is closed and
// replaced whenever a cut heals, waking the pumps that wait for it.
type Network struct {
	mu      sync.Mutex
	owners  map[int]string     // pid → name of a process that may connect
	cut     map[[2]string]bool // unordered pairs of names, the smaller first
	slow    map[string]Slow    // by name: every link of that process
	changed chan struct{}

	ctx       context.Context
	cancel    context.CancelFunc
	listeners []net.Listener
	conns     sync.WaitGroup
	accepted  atomic.Int64 // connections proxied
	strangers atomic.Int64 // of them, those whose owner was never found

	open map[net.Conn]bool // guarded by mu; closed by Close
}

// Slow is what a slowed link does to each chunk of data passing it.
type Slow struct {
	Latency time.Duration // each way
	Jitter  time.Duration // uniform in ±Jitter around Latency
	Loss    float64       // share of chunks held a retransmission timeout more
}

// rto is how long TCP holds data back after a lost segment: Linux's least
// retransmission timeout.
const rto = 200 * time.Millisecond

// NewNetwork returns a network with no proxy yet.
func NewNetwork() *Network {
	ctx, cancel := context.WithCancel(context.Background())
	return &Network{owners: map[int]string{}, cut: map[[2]string]bool{}, slow: map[string]Slow{},
		changed: make(chan struct{}), ctx: ctx, cancel: cancel, open: map[net.Conn]bool{}}
}

// Proxy listens on listen and forwards every connection to upstream, as
// the node named node.
func (n *Network) Proxy(node, listen, upstream string) error {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.listeners = append(n.listeners, l)
	n.mu.Unlock()
	n.conns.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.conns.Go(func() { n.serve(c, node, upstream) })
		}
	})
	return nil
}

// SetOwner names the process pid: connections it makes are its links.
func (n *Network) SetOwner(pid int, name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.owners[pid] = name
}

// ForgetOwner forgets a process that has exited.
func (n *Network) ForgetOwner(pid int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.owners, pid)
}

func pair(a, b string) [2]string {
	if b < a {
		a, b = b, a
	}
	return [2]string{a, b}
}

// Cut cuts the links between a and each of others, both ways.
func (n *Network) Cut(a string, others ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, b := range others {
		n.cut[pair(a, b)] = true
	}
}

// SetSlow slows every link of name (Slow{} heals them).
func (n *Network) SetSlow(name string, s Slow) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s == (Slow{}) {
		delete(n.slow, name)
	} else {
		n.slow[name] = s
	}
}

// Heal heals every cut and every slow link.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.cut)
	clear(n.slow)
	close(n.changed)
	n.changed = make(chan struct{})
}

// isCut says whether the link between a and b is cut, and returns the
// channel closed at the next heal.
func (n *Network) isCut(a, b string) (bool, <-chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cut[pair(a, b)], n.changed
}

// delay is how long a chunk read now on the link between a and b is held.
func (n *Network) delay(a, b string) time.Duration {
	n.mu.Lock()
	sa, sb := n.slow[a], n.slow[b]
	n.mu.Unlock()
	var d time.Duration
	for _, s := range []Slow{sa, sb} {
		if s == (Slow{}) {
			continue
		}
		d += s.Latency
		if s.Jitter > 0 {
			d += time.Duration(rand.Int64N(int64(2*s.Jitter))) - s.Jitter
		}
		if s.Loss > 0 && rand.Float64() < s.Loss {
			d += rto
		}
	}
	return max(d, 0)
}

// waitLink waits until the link between a and b is not cut, or the
// network closes (false).
func (n *Network) waitLink(a, b string) bool {
	for {
		cut, changed := n.isCut(a, b)
		if !cut {
			return true
		}
		select {
		case <-changed:
		case <-n.ctx.Done():
			return false
		}
	}
}

func (n *Network) track(c net.Conn) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ctx.Err() != nil {
		return false
	}
	n.open[c] = true
	return true
}

func (n *Network) untrack(c net.Conn) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.open, c)
}

// serve forwards one connection to the node: once the link is not cut it
// dials the node (a node that is down refuses, and so does the proxy, by
// closing), then pumps each way.
func (n *Network) serve(c net.Conn, node, upstream string) {
	if !n.track(c) {
		c.Close()
		return
	}
	defer n.untrack(c)
	defer c.Close()
	from := n.owner(c)
	n.accepted.Add(1)
	defer func() {
		if from.name() == "" {
			n.strangers.Add(1)
		}
	}()
	if !n.waitLink(from.name(), node) {
		return
	}
	var d net.Dialer
	ctx, cancel := context.WithTimeout(n.ctx, 5*time.Second)
	u, err := d.DialContext(ctx, "tcp", upstream)
	cancel()
	if err != nil {
		return
	}
	if !n.track(u) {
		u.Close()
		return
	}
	defer n.untrack(u)
	defer u.Close()
	var both sync.WaitGroup
	both.Go(func() { n.pump(c, u, from, node) })
	both.Go(func() { n.pump(u, c, from, node) })
	both.Wait()
}

// chunk is data read from one end, held until release.
type chunk struct {
	data    []byte
	release time.Time
	err     error // the read's end: io.EOF, or what broke
}

// pump copies src to dst in order, each chunk held for the link's delay
// and while the link is cut; once either end fails, both are closed.
func (n *Network) pump(src, dst net.Conn, from *owner, node string) {
	held := make(chan chunk, 64) // bounds what a cut or slow link holds: then src is not read
	go func() {
		defer close(held)
		var last time.Time
		for {
			buf := make([]byte, 32<<10)
			k, err := src.Read(buf)
			release := time.Now().Add(n.delay(from.name(), node))
			if release.Before(last) {
				release = last // TCP keeps order: a chunk never passes the one before it
			}
			last = release
			held <- chunk{data: buf[:k], release: release, err: err}
			if err != nil {
				return
			}
		}
	}()
	for c := range held {
		if d := time.Until(c.release); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-n.ctx.Done():
			}
			t.Stop()
		}
		if !n.waitLink(from.name(), node) {
			break
		}
		if len(c.data) > 0 {
			if _, err := dst.Write(c.data); err != nil {
				break
			}
		}
		if c.err != nil {
			break
		}
	}
	src.Close()
	dst.Close()
	for range held { // the reader ends once src is closed
	}
}

// Counts says how many connections the proxies took, and how many of
// those that ended no process of the run held the other end of
// (`listgate migrate`, say): a process's connections made before the run
// learnt its pid are found to be its within ownerRetry of that.
func (n *Network) Counts() (accepted, strangers int64) {
	return n.accepted.Load(), n.strangers.Load()
}

// Close closes every proxy and connection and waits for them.
func (n *Network) Close() error {
	n.cancel()
	n.mu.Lock()
	var errs []error
	for _, l := range n.listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for c := range n.open {
		c.Close()
	}
	n.mu.Unlock()
	n.conns.Wait()
	return errors.Join(errs...)
}

var _ io.Closer = (*Network)(nil)
