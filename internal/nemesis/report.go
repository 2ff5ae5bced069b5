package nemesis

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// report writes what the run did, fault by fault and kind by kind, and
// the problems found.
func (c *checker) report(w io.Writer) {
	fmt.Fprintf(w, "\nfaults (kind: count, time faulted; requests begun meanwhile: adds acknowledged/failed, reads and counts answered/failed; slowest answer; /readyz unready samples):\n")
	type row struct {
		n                               int
		faulted                         time.Duration
		acked, failed, readOK, readFail int
		slowest                         time.Duration
		unready                         int
		codes                           map[string]int
	}
	rows := map[Kind]*row{}
	healthy := &row{codes: map[string]int{}}
	within := func(t time.Time) *event {
		for i := range c.events {
			if !t.Before(c.events[i].Began) && t.Before(c.events[i].End()) {
				return &c.events[i]
			}
		}
		return nil
	}
	for _, e := range c.events {
		r := rows[e.Fault.Kind]
		if r == nil {
			r = &row{codes: map[string]int{}}
			rows[e.Fault.Kind] = r
		}
		r.n++
		r.faulted += e.End().Sub(e.Began)
	}
	for _, q := range c.requests {
		r := healthy
		if e := within(q.Began); e != nil {
			r = rows[e.Fault.Kind]
		}
		r.slowest = max(r.slowest, q.Took)
		if q.Code != "" {
			r.codes[q.Code]++
		}
		switch {
		case (q.Kind == "add" || q.Kind == "batch") && q.Code == "":
			r.acked++
		case q.Kind == "add" || q.Kind == "batch":
			r.failed++
		case q.Code == "":
			r.readOK++
		default:
			r.readFail++
		}
	}
	for _, s := range c.samples {
		r := healthy
		if e := within(s.At); e != nil {
			r = rows[e.Fault.Kind]
		}
		if s.Status != 200 {
			r.unready++
		}
	}
	fmt.Fprintf(w, "| fault | count | time faulted | adds ok / failed | reads ok / failed | slowest | /readyz unready | failures by code |\n|---|---|---|---|---|---|---|---|\n")
	line := func(name string, r *row) {
		var codes []string
		for k, v := range r.codes {
			codes = append(codes, fmt.Sprintf("%s %d", k, v))
		}
		sort.Strings(codes)
		fmt.Fprintf(w, "| %s | %d | %v | %d / %d | %d / %d | %v | %d | %s |\n", name, r.n, r.faulted.Round(time.Second), r.acked, r.failed, r.readOK, r.readFail, r.slowest.Round(time.Millisecond), r.unready, strings.Join(codes, ", "))
	}
	for _, k := range Kinds {
		if r := rows[k]; r != nil {
			line(string(k), r)
		}
	}
	line("none (between faults)", healthy)

	var ends []string
	endCodes := map[string]int{}
	for _, s := range c.subs {
		_, d, sessions, _ := s.snapshot()
		for _, sess := range sessions {
			k := sess.Code
			if k == "" {
				k = strings.SplitN(sess.End, ":", 2)[0]
			}
			endCodes[k]++
		}
		ends = append(ends, fmt.Sprintf("%s %d items in %d subscriptions", s.ID, len(d), len(sessions)))
	}
	var codes []string
	for k, v := range endCodes {
		codes = append(codes, fmt.Sprintf("%s %d", k, v))
	}
	slices.Sort(codes)
	fmt.Fprintf(w, "\nsubscriptions: %s; ended: %s\n", strings.Join(ends, ", "), strings.Join(codes, ", "))
	for _, s := range c.shutdowns {
		fmt.Fprintf(w, "%s ended %v after SIGTERM (%v)\n", s.Gateway, s.Took.Round(time.Millisecond), s.Err)
	}
	r := c.res
	fmt.Fprintf(w, "adds: %d acknowledged, %d failed (%d partly there); reads checked %d: stale %d, phantom %d; subscriptions out of order %d, ended POSITION_EXPIRED %d; readiness %d, shutdown %d, internal errors %d\n",
		r.Acked, r.Failed, r.Partial, len(c.reads), r.Stale, r.Phantom, r.OutOfOrder, r.Expired, r.Readiness, r.Shutdown, r.Internal)
	for _, p := range r.Problems {
		fmt.Fprintf(w, "PROBLEM %s\n", p)
	}
}
