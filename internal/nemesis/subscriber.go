package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/listgate/listgate/internal/wsclient"
)

// A subscriber follows one live list over graphql-transport-ws as a
// client of the docs would: through a gateway chosen at random, and after
// every end (an error, a closed socket, a gateway killed) again through
// any gateway, after the position the error names or the last item's.

const subscribeQuery = `subscription($t: String!, $id: ID!, $f: String!, $after: String) {
  listItemsAdded(entityType: $t, entityId: $id, feature: $f, after: $after) { value timestamp position }
}`

// delivery is one item a subscriber received.
type delivery struct {
	Item    item
	Pos     string
	At      time.Time
	Session int
}

// session is one subscription of a subscriber, from subscribe to its end.
type session struct {
	Gateway string
	After   string
	Began   time.Time
	Ended   time.Time
	End     string // complete, error, or how the socket ended
	Code    string // the code it ended with, if any
	Resume  string // the position the error named, if any
	Items   int
}

// gap is a time in which adds need not be delivered: from a
// POSITION_EXPIRED (the client reads the list, then subscribes without a
// position) to the first item of the new subscription.
type gap struct{ From, To time.Time }

// Subscriber follows one list.
type Subscriber struct {
	ID       string
	List     listRef
	gateways []*Gateway
	rng      *rand.Rand

	mu         sync.Mutex
	started    time.Time // when its first item came; zero until then
	last       string    // the position to resume after
	rearm      bool      // after POSITION_EXPIRED: the next item ends the gap
	deliveries []delivery
	sessions   []session
	gaps       []gap
	stopping   bool // the run ends: no more subscriptions
	open       bool // a subscription is under way (follow runs)
	last0      int  // at stop, the session under way, or -1: the one SIGTERM must complete
	notify     chan struct{}
}

func newSubscriber(id string, l listRef, gateways []*Gateway, seed uint64, n int) *Subscriber {
	return &Subscriber{ID: id, List: l, gateways: gateways, rng: rand.New(rand.NewPCG(seed, uint64(1000+n))), notify: make(chan struct{}, 1)}
}

// Started says whether the subscriber has received its first item.
func (s *Subscriber) Started() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.started.IsZero()
}

// stop makes the subscriber subscribe no more once its session ends.
func (s *Subscriber) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	s.last0 = -1
	if s.open {
		s.last0 = len(s.sessions)
	}
}

// underWay is the session that was under way when the run stopped the
// subscriber, or -1.
func (s *Subscriber) underWay() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last0
}

// run subscribes again and again until ctx ends or stop.
func (s *Subscriber) run(ctx context.Context) {
	for ctx.Err() == nil {
		s.mu.Lock()
		stopping, after := s.stopping, s.last
		s.mu.Unlock()
		if stopping {
			return
		}
		var g *Gateway
		for range 6 {
			if c := s.gateways[s.rng.IntN(len(s.gateways))]; c.Base() != "" {
				g = c
				break
			}
		}
		if g == nil {
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		sess := session{Gateway: g.Name, After: after, Began: time.Now()}
		s.mu.Lock()
		s.open = true
		s.mu.Unlock()
		s.follow(ctx, g, &sess)
		sess.Ended = time.Now()
		s.mu.Lock()
		s.open = false
		s.sessions = append(s.sessions, sess)
		switch {
		case sess.Code == "POSITION_EXPIRED":
			s.last, s.rearm = "", true
			s.gaps = append(s.gaps, gap{From: sess.Ended})
		case sess.Resume != "":
			s.last = sess.Resume
		}
		s.mu.Unlock()
		sleep(ctx, time.Duration(200+s.rng.IntN(800))*time.Millisecond)
	}
}

// follow runs one subscription through g until it ends.
func (s *Subscriber) follow(ctx context.Context, g *Gateway, sess *session) {
	base := g.Base()
	if base == "" {
		sess.End = "gateway down"
		return
	}
	dial, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := wsclient.Dial(dial, base, "")
	cancel()
	if err != nil {
		sess.End = "dial: " + err.Error()
		return
	}
	defer conn.Close()
	vars := map[string]any{"t": entityType, "id": s.List.Entity, "f": s.List.Feature}
	if sess.After != "" {
		vars["after"] = sess.After
	}
	if err := conn.Subscribe(ctx, "s", subscribeQuery, vars); err != nil {
		sess.End = "subscribe: " + err.Error()
		return
	}
	n := len(s.sessions)
	for {
		m, err := conn.Read(ctx)
		if err != nil {
			sess.End = fmt.Sprintf("socket (close code %d): %v", wsclient.CloseStatus(err), err)
			return
		}
		switch m.Type {
		case "next":
			var p struct {
				Data *struct {
					ListItemsAdded struct {
						Value, Timestamp string
						Position         *string
					} `json:"listItemsAdded"`
				} `json:"data"`
				Errors []subError `json:"errors"`
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				sess.End = "a next that is not a result: " + string(m.Payload)
				return
			}
			if len(p.Errors) > 0 || p.Data == nil {
				s.ended(sess, p.Errors)
				continue // its complete follows
			}
			it := p.Data.ListItemsAdded
			ts, err := time.Parse(time.RFC3339Nano, it.Timestamp)
			if err != nil || it.Position == nil {
				sess.End = "an item without a timestamp or position: " + string(m.Payload)
				return
			}
			s.deliver(item{it.Value, ts}, *it.Position, n)
			sess.Items++
		case "error":
			var errs []subError
			json.Unmarshal(m.Payload, &errs)
			s.ended(sess, errs)
			sess.End = "error"
			return
		case "complete":
			sess.End = "complete"
			return
		default:
			sess.End = fmt.Sprintf("an unexpected %s %s", m.Type, m.Payload)
			return
		}
	}
}

// subError is one error a subscription ended with.
type subError struct {
	Message    string `json:"message"`
	Extensions struct {
		Code     string `json:"code"`
		Position string `json:"position"`
	} `json:"extensions"`
}

func (s *Subscriber) ended(sess *session, errs []subError) {
	if len(errs) == 0 {
		sess.Code = "no code"
		return
	}
	sess.Code = errs[0].Extensions.Code
	sess.Resume = errs[0].Extensions.Position
}

func (s *Subscriber) deliver(it item, pos string, n int) {
	now := time.Now()
	s.mu.Lock()
	if s.started.IsZero() {
		s.started = now
	}
	if s.rearm {
		s.gaps[len(s.gaps)-1].To = now
		s.rearm = false
	}
	s.last = pos
	s.deliveries = append(s.deliveries, delivery{it, pos, now, n})
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// snapshot returns what the subscriber has received so far.
func (s *Subscriber) snapshot() (started time.Time, deliveries []delivery, sessions []session, gaps []gap) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started, append([]delivery(nil), s.deliveries...), append([]session(nil), s.sessions...), append([]gap(nil), s.gaps...)
}
