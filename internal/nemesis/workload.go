package nemesis

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/listgate/listgate/internal/gatewaytest"
)

// The workload: adds of one item and of many, to live and plain features
// and to many lists at once, each with explicit timestamps, and reads and
// counts of the lists, through every gateway; each request and its
// outcome is kept in the history the checker reads.

const (
	entityType = "user"
	liveName   = "live"  // a live feature: its adds are recorded for subscriptions
	plainName  = "plain" // a feature that is not live
	entities   = 8       // lists per feature
	ttlSeconds = 7 * 24 * 3600
)

// listRef names one list of the run.
type listRef struct{ Feature, Entity string }

func (l listRef) String() string { return l.Feature + "/" + l.Entity }

func (l listRef) input() map[string]any {
	return map[string]any{"entityType": entityType, "entityId": l.Entity, "feature": l.Feature}
}

// item is one value at one timestamp: the identity of a list item.
type item struct {
	Value string
	TS    time.Time
}

func (it item) key() string { return fmt.Sprintf("%s@%d", it.Value, it.TS.UnixNano()) }

// add is one list's part of an add request: all or nothing.
type add struct {
	ID      int
	Gateway string
	List    listRef
	Items   []item
	Began   time.Time
	Ended   time.Time
	Acked   bool   // the gateway answered that it was written
	Code    string // why not: an error code, or "transport" when no answer came
	Marker  bool   // added to start a subscription
}

// request is one request of the workload, for the deadline check and the
// table.
type request struct {
	Kind    string // add, batch, read, count
	Gateway string
	Began   time.Time
	Took    time.Duration
	Code    string // "" when it succeeded
}

// read is a read of a list, for the checker: a page of its newest items,
// or its count.
type read struct {
	List    listRef
	Began   time.Time
	Ended   time.Time
	Count   int    // listCount; -1 for a page
	Page    []item // listItems, newest first
	Limit   int
	HasMore bool
}

// History is everything the workload did and saw.
type History struct {
	mu       sync.Mutex
	adds     []*add
	requests []request
	reads    []read
}

func (h *History) record(r request, adds []*add, rd *read) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests = append(h.requests, r)
	h.adds = append(h.adds, adds...)
	if rd != nil {
		h.reads = append(h.reads, *rd)
	}
}

// Workload sends the requests.
type Workload struct {
	gateways []*Gateway
	client   *http.Client
	hist     *History
	ids      atomic.Int64
	requests atomic.Int64
	inFlight map[string]*atomic.Int64 // adds in flight, by gateway
	lists    []listRef
	watched  []listRef
}

func newWorkload(gateways []*Gateway, requestTimeout time.Duration) *Workload {
	w := &Workload{gateways: gateways, hist: &History{}, inFlight: map[string]*atomic.Int64{},
		client: &http.Client{
			Timeout:   requestTimeout + 5*time.Second, // past any deadline plus margin: an answer that late is itself a failure
			Transport: &http.Transport{MaxIdleConnsPerHost: 32, DisableCompression: true},
		}}
	for _, g := range gateways {
		w.inFlight[g.Name] = &atomic.Int64{}
	}
	for _, f := range []string{liveName, plainName} {
		for e := range entities {
			w.lists = append(w.lists, listRef{f, fmt.Sprintf("u%d", e)})
		}
	}
	w.watched = w.lists[:3] // live/u0-u2
	return w
}

// send posts a GraphQL request to g and records it; ok when it answered
// with data and no error.
func (w *Workload) send(g *Gateway, kind, query string, vars map[string]any) gatewaytest.Answer {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		panic(err)
	}
	base := g.Base()
	var a gatewaytest.Answer
	if base == "" {
		a = gatewaytest.Answer{Err: fmt.Errorf("%s is down", g.Name)}
	} else {
		a = gatewaytest.Send(w.client, base, "", body)
	}
	w.requests.Add(1)
	return a
}

// code is why an answer failed: its first error's code, "transport" when
// no answer came, or "".
func code(a gatewaytest.Answer) string {
	switch {
	case a.Err != nil || a.Truncated:
		return "transport"
	case len(a.Errors) > 0:
		if c := a.Errors[0].Extensions.Code; c != "" {
			return c
		}
		return "no code"
	case a.Status != http.StatusOK || !a.HasData():
		return fmt.Sprintf("status %d", a.Status)
	}
	return ""
}

func timeString(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

const addQuery = `mutation($list: ListRefInput!, $items: [ListItemInput!]!) { addListItems(list: $list, items: $items) { added expired } }`
const batchQuery = `mutation($adds: [ListAddInput!]!) { addListItemsBatch(adds: $adds) { added expired } }`

// newAdd makes an add of n items to l, at timestamps within an hour of now.
func (w *Workload) newAdd(rng *rand.Rand, l listRef, n int) *add {
	a := &add{ID: int(w.ids.Add(1)), List: l}
	now := time.Now()
	for i := range n {
		v := fmt.Sprintf("a%d.%d", a.ID, i)
		if rng.IntN(8) == 0 {
			v += " é☃🙂" // values are kept exactly as sent: Unicode too
		}
		ts := now.Add(time.Duration(rng.Int64N(int64(2*time.Hour))) - time.Hour)
		a.Items = append(a.Items, item{v, ts})
	}
	return a
}

func itemsInput(a *add) []map[string]any {
	var items []map[string]any
	for _, it := range a.Items {
		items = append(items, map[string]any{"value": it.Value, "timestamp": timeString(it.TS)})
	}
	return items
}

// addOne sends one add through g and records it.
func (w *Workload) addOne(g *Gateway, a *add) {
	a.Gateway = g.Name
	in := w.inFlight[g.Name]
	in.Add(1)
	a.Began = time.Now()
	ans := w.send(g, "add", addQuery, map[string]any{"list": a.List.input(), "items": itemsInput(a)})
	a.Ended = time.Now()
	in.Add(-1)
	var out struct {
		AddListItems *struct{ Added int } `json:"addListItems"`
	}
	a.Code = code(ans)
	if a.Code == "" && json.Unmarshal(ans.Data, &out) == nil && out.AddListItems != nil {
		a.Acked = true
	} else if a.Code == "" {
		a.Code = "no payload"
	}
	w.hist.record(request{"add", g.Name, a.Began, ans.Took, a.Code}, []*add{a}, nil)
}

// addBatch sends adds to several lists in one addListItemsBatch through g:
// each list's add stands or fails alone.
func (w *Workload) addBatch(g *Gateway, adds []*add) {
	var in []map[string]any
	for _, a := range adds {
		a.Gateway = g.Name
		in = append(in, map[string]any{"list": a.List.input(), "items": itemsInput(a)})
	}
	flight := w.inFlight[g.Name]
	flight.Add(1)
	began := time.Now()
	ans := w.send(g, "batch", batchQuery, map[string]any{"adds": in})
	ended := time.Now()
	flight.Add(-1)
	var out struct {
		AddListItemsBatch []*struct{ Added int } `json:"addListItemsBatch"`
	}
	whole := code(ans)
	json.Unmarshal(ans.Data, &out)
	failed := map[int]string{} // index → code
	for _, e := range ans.Errors {
		if len(e.Path) == 2 {
			if i, ok := e.Path[1].(float64); ok {
				failed[int(i)] = e.Extensions.Code
			}
		}
	}
	for i, a := range adds {
		a.Began, a.Ended = began, ended
		switch {
		case ans.Err != nil || ans.Truncated:
			a.Code = "transport"
		case i < len(out.AddListItemsBatch) && out.AddListItemsBatch[i] != nil:
			a.Acked = true
		case failed[i] != "":
			a.Code = failed[i]
		case whole != "":
			a.Code = whole
		default:
			a.Code = "no payload"
		}
	}
	w.hist.record(request{"batch", g.Name, began, ans.Took, whole}, adds, nil)
}

const pageQuery = `query($t: String!, $id: ID!, $f: String!, $n: Int!) { listItems(entityType: $t, entityId: $id, feature: $f, limit: $n) { items { value timestamp } hasMore } }`
const countQuery = `query($t: String!, $id: ID!, $f: String!) { listCount(entityType: $t, entityId: $id, feature: $f) }`

// readPage reads the newest items of l through g.
func (w *Workload) readPage(g *Gateway, l listRef, limit int) {
	rd := read{List: l, Count: -1, Limit: limit, Began: time.Now()}
	ans := w.send(g, "read", pageQuery, map[string]any{"t": entityType, "id": l.Entity, "f": l.Feature, "n": limit})
	rd.Ended = time.Now()
	c := code(ans)
	var out struct {
		ListItems *struct {
			Items   []struct{ Value, Timestamp string }
			HasMore bool
		} `json:"listItems"`
	}
	var ok *read
	if c == "" && json.Unmarshal(ans.Data, &out) == nil && out.ListItems != nil {
		for _, it := range out.ListItems.Items {
			ts, err := time.Parse(time.RFC3339Nano, it.Timestamp)
			if err != nil {
				c = "bad timestamp " + it.Timestamp
			}
			rd.Page = append(rd.Page, item{it.Value, ts})
		}
		rd.HasMore = out.ListItems.HasMore
		ok = &rd
	}
	w.hist.record(request{"read", g.Name, rd.Began, ans.Took, c}, nil, ok)
}

// count counts the items of l through g.
func (w *Workload) count(g *Gateway, l listRef) {
	rd := read{List: l, Began: time.Now()}
	ans := w.send(g, "count", countQuery, map[string]any{"t": entityType, "id": l.Entity, "f": l.Feature})
	rd.Ended = time.Now()
	c := code(ans)
	var out struct {
		ListCount *int `json:"listCount"`
	}
	var ok *read
	if c == "" && json.Unmarshal(ans.Data, &out) == nil && out.ListCount != nil {
		rd.Count = *out.ListCount
		ok = &rd
	}
	w.hist.record(request{"count", g.Name, rd.Began, ans.Took, c}, nil, ok)
}

// pick chooses a gateway that is up, or nil.
func (w *Workload) pick(rng *rand.Rand) *Gateway {
	for range 2 * len(w.gateways) {
		if g := w.gateways[rng.IntN(len(w.gateways))]; g.Base() != "" {
			return g
		}
	}
	return nil
}

// pickList chooses a list, a watched one a third of the time.
func (w *Workload) pickList(rng *rand.Rand) listRef {
	if rng.IntN(3) == 0 {
		return w.watched[rng.IntN(len(w.watched))]
	}
	return w.lists[rng.IntN(len(w.lists))]
}

// adder sends adds until ctx ends, pace apart: one list of one item or of
// 2-20, or 2-4 lists in one batch.
func (w *Workload) adder(ctx context.Context, rng *rand.Rand, pace time.Duration) {
	for ctx.Err() == nil {
		g := w.pick(rng)
		if g == nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		switch r := rng.IntN(10); {
		case r < 3:
			w.addOne(g, w.newAdd(rng, w.pickList(rng), 1))
		case r < 6:
			w.addOne(g, w.newAdd(rng, w.pickList(rng), 2+rng.IntN(19)))
		default:
			var adds []*add
			seen := map[listRef]bool{}
			for range 2 + rng.IntN(3) {
				l := w.pickList(rng)
				if !seen[l] {
					seen[l] = true
					adds = append(adds, w.newAdd(rng, l, 1+rng.IntN(5)))
				}
			}
			w.addBatch(g, adds)
		}
		sleep(ctx, pace)
	}
}

// reader reads pages and counts until ctx ends, pace apart.
func (w *Workload) reader(ctx context.Context, rng *rand.Rand, pace time.Duration) {
	for ctx.Err() == nil {
		g := w.pick(rng)
		if g == nil {
			sleep(ctx, 100*time.Millisecond)
			continue
		}
		l := w.lists[rng.IntN(len(w.lists))]
		if rng.IntN(2) == 0 {
			w.readPage(g, l, 10+rng.IntN(41))
		} else {
			w.count(g, l)
		}
		sleep(ctx, pace)
	}
}

// addsInFlight is how many adds g is answering now.
func (w *Workload) addsInFlight(g *Gateway) int64 { return w.inFlight[g.Name].Load() }

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// createFeatures creates the run's two features through g.
func (w *Workload) createFeatures(g *Gateway) error {
	for _, f := range []struct {
		name string
		live bool
	}{{liveName, true}, {plainName, false}} {
		q := fmt.Sprintf(`mutation { createListFeature(input: {entityType: %q, name: %q, valueType: STRING, ttlSeconds: %d, live: %v}) { key } }`,
			entityType, f.name, ttlSeconds, f.live)
		if a := w.send(g, "setup", q, nil); a.Problem() != "" && !strings.Contains(string(a.Body), "CONFLICT") {
			return fmt.Errorf("creating %s: %s", f.name, a.Problem())
		}
	}
	return nil
}
