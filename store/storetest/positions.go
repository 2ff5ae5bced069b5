package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
)

// A catch-up that reads slowly while the records after its position pass
// the retention fails with PositionExpired, as does a read of the whole
// feed from there, rather than skip what the feed no longer keeps, swept
// or not yet: the client is told to read the list again.
func testCatchUpPastRetention(t *testing.T, h *harness) {
	const retention = 5 * time.Second
	h.reopen(Options{FeedRetention: retention})
	l := h.list(h.live(h.feature("feed", "", time.Hour)), "slow")
	watched := func(id store.ListID) bool { return id == l.ID() }
	head, err := store.AwaitHead(h.ctx, h.s)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 10 {
		h.add(l, item(now.Add(time.Duration(i)*time.Millisecond), fmt.Sprint("r", i)))
	}
	_, end := h.readFeed(head, watched, "r9")
	var read []store.Change
	at := head
	for len(read) < 4 {
		changes, reached, _, err := h.s.ListFeed(h.ctx, l, at, end, 1) // a record a read
		if err != nil {
			t.Fatalf("ListFeed after %v: %v", values(read), err)
		}
		read, at = append(read, changes...), reached
	}
	equal(t, "read within the retention", values(read), []string{"r0", "r1", "r2", "r3"})

	// Past the retention by the store's clock at once; by a cluster's,
	// which a store may keep to rather than its own, within it.
	h.offset.Add(int64(retention + time.Minute))
	deadline := time.Now().Add(retention + 30*time.Second)
	for h.s.CheckPosition(h.ctx, at) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the position after r3 is still kept %v after the records after it passed the retention", retention+30*time.Second)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if changes, _, _, err := h.s.ListFeed(h.ctx, l, at, end, 1<<20); !errors.Is(err, errkind.PositionExpired) {
		t.Fatalf("the rest of the catch-up, past the retention: %v, %v; want PositionExpired", values(changes), err)
	}
	if changes, _, err := h.s.ReadFeed(h.ctx, at, watched, 1<<20); !errors.Is(err, errkind.PositionExpired) {
		t.Fatalf("the feed after r3, past the retention: %v, %v; want PositionExpired", values(changes), err)
	}
}

// A position no reader was given is refused, PositionExpired: after an
// item its record does not have, after an item of a record the feed does
// not hold (the one just after a record, or just after the head), or
// after a whole record past the settled end. Taken, it could skip the
// items of a record that comes later.
func testPositionsOfNoRecord(t *testing.T, h *harness) {
	l := h.list(h.live(h.feature("feed", "", time.Hour)), "u")
	head, err := store.AwaitHead(h.ctx, h.s)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	h.add(l, item(now, "a"), item(now.Add(time.Millisecond), "b"))
	h.add(l, item(now, "end"))
	all, _ := h.readFeed(head, func(id store.ListID) bool { return id == l.ID() }, "end")
	equal(t, "records", values(all), []string{"a,b", "end"})
	end, err := store.AwaitHead(h.ctx, h.s)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []store.Position{head, all[0].After(0), all[0].After(1), all[1].After(0), {Record: all[0].Record, Item: store.AllItems}, end} {
		if err := h.s.CheckPosition(h.ctx, p); err != nil {
			t.Fatalf("CheckPosition(%v), a position a reader is given: %v", p, err)
		}
	}
	for what, p := range map[string]store.Position{
		"after an item its record does not have":          all[0].After(2),
		"after item 1000 of a record":                     all[0].After(1000),
		"after an item of the record just after the last": {Record: nextRecord(all[1].Record), Item: 0},
		"after an item of the record just after the head": {Record: nextRecord(end.Record), Item: 0},
		"after the record just after the head":            {Record: nextRecord(end.Record), Item: store.AllItems},
	} {
		if err := h.s.CheckPosition(h.ctx, p); !errors.Is(err, errkind.PositionExpired) {
			t.Errorf("CheckPosition %s: %v, want PositionExpired", what, err)
		}
	}
}

// nextRecord is the record named by rec's bytes plus one, as a big-endian
// number: the one just after it, in the feed's order.
func nextRecord(rec string) string {
	b := []byte(rec)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i]++; b[i] != 0 {
			break
		}
	}
	return string(b)
}
