package nemesis

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/listgate/listgate/internal/gatewaytest"
)

// What the checker holds the run to, once every fault has healed:
//
//   - every acknowledged add is in its list, each item with its exact
//     value and timestamp (lost, altered);
//   - every add whose request failed is in its list wholly or not at all
//     (partial): an add to one list is one batch, all or nothing, and
//     addListItemsBatch writes each list on its own;
//   - a page or count read after an add was acknowledged shows it, and
//     none shows an item no add sent (stale, phantom);
//   - every subscription received every acknowledged add that began after
//     it started, each item once, in the same order and at the same
//     position as every other subscription of its list (missed,
//     duplicated, out of order), across all the times it resumed;
//   - no request answered later than --request-timeout plus the margin
//     (past deadline), and none failed with a code a client cannot act on
//     (INTERNAL, or none);
//   - /readyz ready while the gateway could serve (whatever one node of
//     three does), ready within readyAfterHeal of every heal, and unready
//     while the gateway was cut from the cluster (readiness);
//   - every gateway exited 0 within --shutdown-timeout of SIGTERM, each of
//     its subscriptions completed (shutdown).

// readyAfterHeal is how soon after a heal, the cluster answering, every
// gateway must be ready.
const readyAfterHeal = 5 * time.Second

// unreadyWithin is how soon a gateway cut from the cluster must say it is
// unready, and stay so until the heal.
const unreadyWithin = 5 * time.Second

// Result is what the checker found.
type Result struct {
	Seed         uint64
	Faults       int
	Acked        int // acknowledged adds
	Lost         int // acknowledged adds not wholly in their list
	Altered      int // items in a list whose value or timestamp no add sent
	Missed       int // items of acknowledged adds a subscription did not receive
	Duplicated   int // items a subscription received more than once
	PastDeadline int // requests answered past --request-timeout plus the margin

	Failed     int // adds whose request failed
	Partial    int // failed adds in their list in part
	Stale      int // reads that missed an add acknowledged before they began
	Phantom    int // items read or delivered that no add sent
	OutOfOrder int // items two subscriptions of a list received in another order, or at other positions
	Readiness  int // /readyz answers unready while the gateway could serve, heals after which it was not ready in time, cuts it did not report
	Shutdown   int // gateways that did not end well on SIGTERM, subscriptions not completed
	Internal   int // requests failed with INTERNAL or without a code
	Expired    int // subscriptions ended POSITION_EXPIRED (adds in their gap not checked)

	Problems []string // the first few of each failure, for the log
}

// Other counts the failures the last line's named figures leave out.
func (r *Result) Other() int {
	return r.Partial + r.Stale + r.Phantom + r.OutOfOrder + r.Readiness + r.Shutdown + r.Internal
}

// OK says whether every check passed.
func (r *Result) OK() bool {
	return r.Lost+r.Altered+r.Missed+r.Duplicated+r.PastDeadline+r.Other() == 0
}

// Line is the run's last line.
func (r *Result) Line() string {
	verdict := "PASS"
	if !r.OK() {
		verdict = "FAIL"
	}
	return fmt.Sprintf("nemesis %s seed %d: faults injected %d, acknowledged adds %d, lost %d, altered %d, deliveries missed %d, duplicated %d, requests past deadline %d (other failures %d)",
		verdict, r.Seed, r.Faults, r.Acked, r.Lost, r.Altered, r.Missed, r.Duplicated, r.PastDeadline, r.Other())
}

func (r *Result) problem(kind string, format string, args ...any) {
	n := 0
	for _, p := range r.Problems {
		if strings.HasPrefix(p, kind+": ") {
			n++
		}
	}
	if n < 5 {
		r.Problems = append(r.Problems, kind+": "+fmt.Sprintf(format, args...))
	}
}

// listContents reads every item of l through base, page by page.
func listContents(w *Workload, g *Gateway, l listRef) ([]item, error) {
	var items []item
	after := any(nil)
	for range 10000 {
		q := `query($t: String!, $id: ID!, $f: String!, $after: String) { listItems(entityType: $t, entityId: $id, feature: $f, limit: 1000, after: $after) { items { value timestamp } hasMore endCursor } }`
		body, _ := json.Marshal(map[string]any{"query": q, "variables": map[string]any{"t": entityType, "id": l.Entity, "f": l.Feature, "after": after}})
		a := gatewaytest.Send(w.client, g.Base(), "", body)
		if p := a.Problem(); p != "" {
			return nil, fmt.Errorf("reading %s: %s", l, p)
		}
		var out struct {
			ListItems struct {
				Items     []struct{ Value, Timestamp string }
				HasMore   bool
				EndCursor string
			} `json:"listItems"`
		}
		if err := json.Unmarshal(a.Data, &out); err != nil {
			return nil, err
		}
		for _, it := range out.ListItems.Items {
			ts, err := time.Parse(time.RFC3339Nano, it.Timestamp)
			if err != nil {
				return nil, err
			}
			items = append(items, item{it.Value, ts})
		}
		if !out.ListItems.HasMore {
			return items, nil
		}
		after = out.ListItems.EndCursor
	}
	return nil, fmt.Errorf("reading %s: more than 10,000 pages", l)
}

// checker holds what the run did and saw.
type checker struct {
	cfg       Config
	adds      []*add
	requests  []request
	reads     []read
	contents  map[listRef][]item
	subs      []*Subscriber
	samples   []sample
	events    []event
	shutdowns []shutdown

	byKey   map[string]*add // item key → its add
	byValue map[string]item // value → the item sent with it
	res     *Result
}

// shutdown is how one gateway ended on SIGTERM.
type shutdown struct {
	Gateway string
	Took    time.Duration
	Err     error
}

func (c *checker) check() *Result {
	c.res = &Result{Seed: c.cfg.Seed, Faults: len(c.events)}
	c.index()
	c.checkAdds()
	c.checkReads()
	c.checkSubscriptions()
	c.checkRequests()
	c.checkReadiness()
	c.checkShutdown()
	return c.res
}

// index maps every item sent to its add.
func (c *checker) index() {
	c.byKey, c.byValue = map[string]*add{}, map[string]item{}
	for _, a := range c.adds {
		for _, it := range a.Items {
			c.byKey[it.key()] = a
			c.byValue[it.Value] = it
		}
	}
}

func (c *checker) checkAdds() {
	present := map[string]int{}
	for l, items := range c.contents {
		for _, it := range items {
			present[it.key()]++
			if c.byKey[it.key()] != nil {
				continue
			}
			c.res.Altered++
			if sent, ok := c.byValue[it.Value]; ok {
				c.res.problem("altered", "%s holds %q at %s; it was sent at %s", l, it.Value, timeString(it.TS), timeString(sent.TS))
			} else {
				c.res.problem("altered", "%s holds %q at %s, which no add sent", l, it.Value, timeString(it.TS))
			}
		}
	}
	for _, a := range c.adds {
		n := 0
		for _, it := range a.Items {
			if present[it.key()] > 0 {
				n++
			}
		}
		if a.Acked {
			c.res.Acked++
			if n != len(a.Items) {
				c.res.Lost++
				c.res.problem("lost", "add %d of %d items to %s through %s, acknowledged after %v: %d items are there", a.ID, len(a.Items), a.List, a.Gateway, a.Ended.Sub(a.Began).Round(time.Millisecond), n)
			}
			continue
		}
		c.res.Failed++
		if n != 0 && n != len(a.Items) {
			c.res.Partial++
			c.res.problem("partial", "add %d of %d items to %s through %s failed (%s): %d items are there", a.ID, len(a.Items), a.List, a.Gateway, a.Code, n)
		}
	}
}

// checkReads holds each read to the adds acknowledged before it began:
// a count at least their items, a page holding every one of them newer
// than its oldest item (or every one, if it is not full), and nothing no
// add had sent by the time it ended.
func (c *checker) checkReads() {
	type stamped struct {
		it          item
		began, ackd time.Time
		acked       bool
	}
	byList := map[listRef][]stamped{}
	for _, a := range c.adds {
		for _, it := range a.Items {
			byList[a.List] = append(byList[a.List], stamped{it, a.Began, a.Ended, a.Acked})
		}
	}
	for _, rd := range c.reads {
		var before []stamped // acknowledged before the read began
		sent := 0            // items of adds begun before it ended
		for _, s := range byList[rd.List] {
			if s.acked && s.ackd.Before(rd.Began) {
				before = append(before, s)
			}
			if s.began.Before(rd.Ended) {
				sent++
			}
		}
		if rd.Count >= 0 {
			distinct := map[string]bool{}
			for _, s := range before {
				distinct[s.it.key()] = true
			}
			if rd.Count < len(distinct) {
				c.res.Stale++
				c.res.problem("stale", "a count of %s at %s: %d, below the %d items acknowledged before it", rd.List, rd.Began.Format(time.TimeOnly), rd.Count, len(distinct))
			}
			if rd.Count > sent {
				c.res.Phantom++
				c.res.problem("phantom", "a count of %s at %s: %d, above the %d items sent before it ended", rd.List, rd.Began.Format(time.TimeOnly), rd.Count, sent)
			}
			continue
		}
		got := map[string]bool{}
		for _, it := range rd.Page {
			got[it.key()] = true
			if a := c.byKey[it.key()]; a == nil || !a.Began.Before(rd.Ended) {
				c.res.Phantom++
				c.res.problem("phantom", "a page of %s at %s holds %q at %s, which no add had sent", rd.List, rd.Began.Format(time.TimeOnly), it.Value, timeString(it.TS))
			}
		}
		var floor time.Time // items at or below the page's oldest may be past its limit
		if len(rd.Page) == rd.Limit && len(rd.Page) > 0 {
			floor = rd.Page[len(rd.Page)-1].TS
		}
		for _, s := range before {
			if !s.it.TS.After(floor) || got[s.it.key()] {
				continue
			}
			c.res.Stale++
			c.res.problem("stale", "a page of %s at %s lacks %q at %s, acknowledged %v before it began", rd.List, rd.Began.Format(time.TimeOnly), s.it.Value, timeString(s.it.TS), rd.Began.Sub(s.ackd).Round(time.Millisecond))
			break // one stale read, however many items it lacks
		}
	}
}

func (c *checker) checkSubscriptions() {
	byList := map[listRef][]*Subscriber{}
	for _, s := range c.subs {
		byList[s.List] = append(byList[s.List], s)
		started, deliveries, sessions, gaps := s.snapshot()
		got := map[string]int{}
		for _, d := range deliveries {
			got[d.Item.key()]++
			if c.byKey[d.Item.key()] == nil {
				c.res.Phantom++
				c.res.problem("phantom", "subscription %s to %s received %q at %s, which no add sent", s.ID, s.List, d.Item.Value, timeString(d.Item.TS))
			}
		}
		for k, n := range got {
			if n <= 1 {
				continue
			}
			c.res.Duplicated += n - 1
			var at []string
			for _, d := range deliveries {
				if d.Item.key() == k {
					through := "still open"
					if d.Session < len(sessions) {
						through = fmt.Sprintf("through %s, after %q, ended %s %s", sessions[d.Session].Gateway, sessions[d.Session].After, sessions[d.Session].Code, sessions[d.Session].End)
					}
					at = append(at, fmt.Sprintf("%s in subscription %d (%s) at position %q", d.At.Format("15:04:05.000"), d.Session, through, d.Pos))
				}
			}
			what := "no add"
			if a := c.byKey[k]; a != nil {
				what = fmt.Sprintf("add %d of %d items through %s, %s-%s, acknowledged %v (%s)", a.ID, len(a.Items), a.Gateway, a.Began.Format("15:04:05.000"), a.Ended.Format("15:04:05.000"), a.Acked, a.Code)
			}
			c.res.problem("duplicated", "subscription %s to %s received %s (%s) %d times: %s", s.ID, s.List, k, what, n, strings.Join(at, "; "))
		}
		for _, sess := range sessions {
			if sess.Code == "POSITION_EXPIRED" {
				c.res.Expired++
			}
		}
		if started.IsZero() {
			c.res.Missed++
			c.res.problem("missed", "subscription %s to %s never started", s.ID, s.List)
			continue
		}
	adds:
		for _, a := range c.adds {
			if a.List != s.List || !a.Acked || a.Marker || !a.Began.After(started) {
				continue
			}
			for _, g := range gaps {
				if a.Began.After(g.From) && (g.To.IsZero() || a.Began.Before(g.To)) {
					continue adds
				}
			}
			for _, it := range a.Items {
				if got[it.key()] == 0 {
					c.res.Missed++
					c.res.problem("missed", "subscription %s to %s did not receive %q at %s of add %d through %s, acknowledged at %s",
						s.ID, s.List, it.Value, timeString(it.TS), a.ID, a.Gateway, a.Ended.Format(time.TimeOnly))
				}
			}
		}
	}
	// Two subscriptions of one list: the items both received, in the same
	// order and at the same positions.
	for l, subs := range byList {
		for i := 1; i < len(subs); i++ {
			_, a, _, _ := subs[0].snapshot()
			_, b, _, _ := subs[i].snapshot()
			posB, idxB := map[string]string{}, map[string]int{}
			for j, d := range b {
				if _, dup := idxB[d.Item.key()]; !dup {
					posB[d.Item.key()], idxB[d.Item.key()] = d.Pos, j
				}
			}
			last, seen := -1, map[string]bool{}
			for _, d := range a {
				k := d.Item.key()
				j, ok := idxB[k]
				if !ok || seen[k] {
					continue
				}
				seen[k] = true
				if j < last || posB[k] != d.Pos {
					c.res.OutOfOrder++
					c.res.problem("out of order", "%s: %s came at %s to %s and at %s to %s, in another order or position", l, k, d.Pos, subs[0].ID, posB[k], subs[i].ID)
				}
				last = max(last, j)
			}
		}
	}
}

func (c *checker) checkRequests() {
	limit := c.cfg.RequestTimeout + c.cfg.Margin
	for _, r := range c.requests {
		if r.Took > limit {
			c.res.PastDeadline++
			c.res.problem("past deadline", "a %s through %s at %s answered after %v (%s)", r.Kind, r.Gateway, r.Began.Format(time.TimeOnly), r.Took.Round(time.Millisecond), r.Code)
		}
		if r.Code == "INTERNAL" || r.Code == "no code" || r.Code == "no payload" {
			c.res.Internal++
			c.res.problem("internal", "a %s through %s at %s failed %s", r.Kind, r.Gateway, r.Began.Format(time.TimeOnly), r.Code)
		}
	}
}

// samplesOf returns g's /readyz samples asked in [from, to].
func (c *checker) samplesOf(g string, from, to time.Time) []sample {
	var s []sample
	for _, x := range c.samples {
		if x.Gateway == g && !x.At.Before(from) && !x.At.After(to) {
			s = append(s, x)
		}
	}
	return s
}

func (c *checker) checkReadiness() {
	// Ready while it could serve: every answer of a gateway not cut off
	// nor killed (nor starting again after either) is ready, whatever
	// one node does.
	off := func(s sample) bool {
		for _, e := range c.events {
			struck := (e.Fault.Kind == IsolateGateway || e.Fault.Kind == KillGateway) && gatewayName(e.Fault.Gateway) == s.Gateway
			// Asked before the fault, an answer may come after it struck.
			if struck && !s.At.Add(s.Took).Before(e.Began) && s.At.Before(e.End().Add(readyAfterHeal)) {
				return true
			}
		}
		return false
	}
	unready := map[string]int{}
	for _, s := range c.samples {
		if s.Status != 200 && !off(s) {
			if unready[s.Gateway] == 0 {
				c.res.problem("readiness", "%s answered /readyz %d at %s, while it could serve", s.Gateway, s.Status, s.At.Format("15:04:05.000"))
			}
			unready[s.Gateway]++
		}
	}
	for _, n := range unready {
		c.res.Readiness += n
	}
	for _, e := range c.events {
		h := e.End()
		for i := range c.cfg.Gateways {
			g := gatewayName(i)
			ready := false
			for _, s := range c.samplesOf(g, h, h.Add(readyAfterHeal)) {
				if s.Status == 200 {
					ready = true
					break
				}
			}
			if !ready {
				c.res.Readiness++
				c.res.problem("readiness", "%s was not ready within %v of the heal of fault %s", g, readyAfterHeal, e.Fault)
			}
		}
		if e.Fault.Kind != IsolateGateway {
			continue
		}
		g := gatewayName(e.Fault.Gateway)
		cut := c.samplesOf(g, e.Began.Add(unreadyWithin), e.Healed)
		for _, s := range cut {
			if s.Status == 200 && s.At.Add(s.Took).Before(e.Healed) { // an answer after the heal may be right
				c.res.Readiness++
				c.res.problem("readiness", "%s answered ready %v into fault %s", g, s.At.Sub(e.Began).Round(100*time.Millisecond), e.Fault)
				break
			}
		}
	}
}

func (c *checker) checkShutdown() {
	for _, s := range c.shutdowns {
		if s.Err != nil || s.Took > c.cfg.ShutdownTimeout {
			c.res.Shutdown++
			c.res.problem("shutdown", "%s on SIGTERM: took %v (--shutdown-timeout %v): %v", s.Gateway, s.Took.Round(time.Millisecond), c.cfg.ShutdownTimeout, s.Err)
		}
	}
	for _, sub := range c.subs {
		_, _, sessions, _ := sub.snapshot()
		i := sub.underWay()
		if i < 0 || i >= len(sessions) {
			continue // between two subscriptions when its gateway stopped
		}
		if last := sessions[i]; last.End != "complete" {
			c.res.Shutdown++
			c.res.problem("shutdown", "subscription %s through %s ended %q on SIGTERM, not complete", sub.ID, last.Gateway, last.End)
		}
	}
}
