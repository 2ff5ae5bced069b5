package cql

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocql/gocql"
	"go.opentelemetry.io/otel/metric"
)

// Hosts that do not answer in time go to the back of every plan.
//
// gocql's token-aware policy shuffles a partition's replicas for each
// statement, so a node that has stopped answering (a GC pause, a frozen
// VM, a slow link) is the first host of a third of the plans at RF 3:
// each of those reads waits for it, or, speculated, for the speculative
// delay, and each write waits for --cql-timeout. slowHosts moves a host
// that lately did not answer in time behind every other host of a plan,
// for avoidHostFor: one whose attempt a speculative execution overtook
// after the delay, or that timed out. An answer from it within the delay
// puts it back at once: the clock's samples (clock.go) ask every node
// every 2 s, addressed to it, so a node that answers again is back within
// that. gocql's own AvoidSlowReplicas does not see such a node: it
// counts requests in flight (on Cassandra, a host's connections, as
// defaultConnPicker.InFlight does), and a frozen node holds few.

// avoidHostFor is how long a host that did not answer in time stays at
// the back of the plans, unless it answers in time before.
const avoidHostFor = 10 * time.Second

// slowHosts is a host selection policy that moves the hosts that lately
// did not answer in time to the back of the plans of the policy it wraps.
// It calls the wrapped policy without its lock held; under it, nothing but
// a HostInfo's own accessors.
type slowHosts struct {
	gocql.HostSelectionPolicy
	mono  func() int64         // ns, for time elapsed only
	delay func() time.Duration // in time: within the speculative delay

	latest atomic.Int64 // no host is avoided from this mono() on (a hint: never earlier than any)
	up     atomic.Int32 // hosts of the ring up, as the session last said

	mu      sync.Mutex
	until   map[string]int64           // host ID → when it stops being avoided, mono() ns
	members map[string]*gocql.HostInfo // the ring's hosts, by host ID
}

func newSlowHosts(p gocql.HostSelectionPolicy, mono func() int64, delay func() time.Duration) *slowHosts {
	return &slowHosts{HostSelectionPolicy: p, mono: mono, delay: delay, until: map[string]int64{}, members: map[string]*gocql.HostInfo{}}
}

// The session tells the policy of the ring's hosts; slowHosts counts
// those up. gocql sends a speculative execution to the next host of its
// plan, and with none left it fails at once, and its error is the read's
// answer: a read is speculated only while another host is up (Up).

// AddHosts adds hosts at once, as the token-aware policy does when the
// session starts.
func (h *slowHosts) AddHosts(hosts []*gocql.HostInfo) {
	if p, ok := h.HostSelectionPolicy.(interface{ AddHosts([]*gocql.HostInfo) }); ok {
		p.AddHosts(hosts)
	} else {
		for _, host := range hosts {
			h.HostSelectionPolicy.AddHost(host)
		}
	}
	h.recount(hosts, nil)
}

func (h *slowHosts) AddHost(host *gocql.HostInfo) {
	h.HostSelectionPolicy.AddHost(host)
	h.recount([]*gocql.HostInfo{host}, nil)
}

func (h *slowHosts) RemoveHost(host *gocql.HostInfo) {
	h.HostSelectionPolicy.RemoveHost(host)
	h.recount(nil, host)
}

func (h *slowHosts) HostUp(host *gocql.HostInfo) {
	h.HostSelectionPolicy.HostUp(host)
	h.recount(nil, nil)
}

func (h *slowHosts) HostDown(host *gocql.HostInfo) {
	h.HostSelectionPolicy.HostDown(host)
	h.recount(nil, nil)
}

// recount adds hosts to the ring's, removes gone, and counts those up.
func (h *slowHosts) recount(added []*gocql.HostInfo, gone *gocql.HostInfo) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, host := range added {
		h.members[hostKey(host)] = host
	}
	if gone != nil {
		delete(h.members, hostKey(gone))
	}
	n := 0
	for _, host := range h.members {
		if host.IsUp() {
			n++
		}
	}
	h.up.Store(int32(n))
}

// Up is how many of the ring's hosts are up.
func (h *slowHosts) Up() int { return int(h.up.Load()) }

// hostKey names a host: its host ID, or its address before it has one.
func hostKey(host *gocql.HostInfo) string {
	if id := host.HostID(); id != "" {
		return id
	}
	return host.ConnectAddress().String()
}

// Pick is the wrapped policy's plan, with the hosts avoided now moved to
// its end, in their order.
func (h *slowHosts) Pick(q gocql.ExecutableQuery) gocql.NextHost {
	if q != nil {
		q = routed{q}
	}
	next := h.HostSelectionPolicy.Pick(q)
	now := h.mono()
	if now >= h.latest.Load() {
		return next
	}
	var held []gocql.SelectedHost
	done := false
	return func() gocql.SelectedHost {
		for !done {
			sh := next()
			if sh == nil {
				done = true
				break
			}
			if !h.avoided(sh.Info(), now) {
				return sh
			}
			held = append(held, sh)
		}
		if len(held) == 0 {
			return nil
		}
		sh := held[0]
		held = held[1:]
		return sh
	}
}

func (h *slowHosts) avoided(host *gocql.HostInfo, now int64) bool {
	if host == nil {
		return false
	}
	id := hostKey(host)
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.until[id] > now
}

// observe takes an attempt on host that took took and ended with err;
// ctx is its statement's.
func (h *slowHosts) observe(ctx context.Context, host *gocql.HostInfo, took time.Duration, err error) {
	if host == nil {
		return
	}
	switch {
	case err == nil:
		if took < h.delay() {
			h.answered(host)
		}
	case errors.Is(err, gocql.ErrTimeoutNoResponse),
		// Canceled while its statement still waits: gocql took another
		// attempt's answer.
		errors.Is(err, context.Canceled) && ctx.Err() == nil && took >= h.delay():
		h.avoid(host)
	}
}

// avoid moves host to the back of the plans for avoidHostFor.
func (h *slowHosts) avoid(host *gocql.HostInfo) {
	id := hostKey(host)
	until := h.mono() + int64(avoidHostFor)
	h.mu.Lock()
	h.until[id] = until
	h.mu.Unlock()
	maxInt64(&h.latest, until)
}

// answered puts host back in its place, if it was avoided.
func (h *slowHosts) answered(host *gocql.HostInfo) {
	if h.mono() >= h.latest.Load() {
		return // none is avoided: the common case, without a lock
	}
	id := hostKey(host)
	h.mu.Lock()
	delete(h.until, id)
	h.mu.Unlock()
}

// avoiding is how many hosts are at the back of the plans now.
func (h *slowHosts) avoiding() int {
	now := h.mono()
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, until := range h.until {
		if until > now {
			n++
		}
	}
	return n
}

// observeSlowHosts exports listgate_cql_hosts_avoided.
func observeSlowHosts(meter metric.Meter, h *slowHosts) error {
	avoided, err := meter.Int64ObservableGauge("listgate.cql.hosts_avoided",
		metric.WithDescription("Nodes at the back of every statement's plan because they lately did not answer within the speculative delay, or timed out."))
	if err != nil {
		return err
	}
	_, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(avoided, int64(h.avoiding()))
		return nil
	}, avoided)
	return err
}

// routed is a statement as the token-aware policy should see it: a
// lightweight transaction only if it is one. On Cassandra, gocql v1.19.0
// marks every prepared statement as one (its LWT flag is ScyllaDB's
// protocol extension, a mask of 0 elsewhere, and flags&0 == 0), and the
// policy then keeps a partition's replicas in ring order, so that a
// partition's reads all go to its first replica, frozen or not.
type routed struct{ gocql.ExecutableQuery }

func (r routed) IsLWT() bool {
	if !r.ExecutableQuery.IsLWT() {
		return false
	}
	if r.GetConsistency().IsSerial() {
		return true
	}
	switch q := r.ExecutableQuery.(type) {
	case interface{ Statement() string }: // a *gocql.Query
		return conditional(q.Statement())
	case *gocql.Batch:
		for _, e := range q.Entries {
			if conditional(e.Stmt) {
				return true
			}
		}
		return false
	}
	return true
}

// conditional says whether a statement of this store is a lightweight
// transaction: its conditions are written " IF ".
func conditional(stmt string) bool { return strings.Contains(stmt, " IF ") }

// retryNextHost is a retry policy without gocql's LWTRetryPolicy methods,
// which retry a lightweight transaction on the host that failed it: with
// every statement marked one (routed), a read whose node froze was
// retried on it, again and again, for as long as it was frozen. A
// lightweight transaction that may have run is not idempotent, and not
// retried either way.
type retryNextHost struct{ p gocql.RetryPolicy }

func (r retryNextHost) Attempt(q gocql.RetryableQuery) bool    { return r.p.Attempt(q) }
func (r retryNextHost) GetRetryType(err error) gocql.RetryType { return r.p.GetRetryType(err) }

// convictUp is the conviction policy: a failed connection convicts a host
// the driver counts up, and none it already counts down. gocql removes a
// convicted host's pool, and a fill of it that had connected once before
// failing marks the host up on a goroutine of its own, which may run
// after the removal: the host is then up with no pool, which nothing
// makes again (the reconnect loop fills only hosts counted down), and
// every statement fails "no hosts available in the pool" until the
// gateway restarts (seen once, after a one-node cluster restarted). A
// host already down keeps its pool, which the reconnect loop fills again
// each ReconnectInterval. The control connection's attempts convict the
// contact points, new HostInfos always counted up, so the host is looked
// up in the session, as gocql then does, by its address.
type convictUp struct {
	session atomic.Pointer[gocql.Session] // nil until the session is made
}

func (c *convictUp) AddFailure(_ error, host *gocql.HostInfo) bool {
	if s := c.session.Load(); s != nil {
		for _, h := range s.GetHosts() {
			if h.ConnectAddress().Equal(host.ConnectAddress()) {
				return h.IsUp()
			}
		}
	}
	return host.IsUp()
}

func (*convictUp) Reset(*gocql.HostInfo) {}
