package load

import (
	"sync"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// grouper gathers a chunk's items by list, in the order lists first come.
type grouper struct {
	byList map[listKey]*Add
	adds   []*Add
	items  int
	bytes  int // of the values
}

type listKey struct{ feature, entityID string }

func newGrouper() *grouper { return &grouper{byList: map[listKey]*Add{}} }

func (g *grouper) add(l store.List, it store.NewItem, ref RowRef) {
	k := listKey{l.Feature.Key(), l.EntityID}
	a := g.byList[k]
	if a == nil {
		a = &Add{List: l}
		g.byList[k] = a
		g.adds = append(g.adds, a)
	}
	a.Items = append(a.Items, it)
	a.Rows = append(a.Rows, ref)
	g.items++
	g.bytes += len(it.Value)
}

// itemBytes is what an item adds to an add, as store.PrepareAdd counts it
// (its key, value and a row's overhead), and to a request, as its JSON
// (values.WrittenLen and the timestamp's text) is at most.
func itemBytes(v []byte) int { return keys.ItemKeyLen + 2*len(v) + 96 }

// listBytes is what a list adds to an add or a request besides its items.
func listBytes(l store.List) int { return len(l.Feature.Key()) + len(l.EntityID) + 128 }

// pack splits the adds into pieces within a list's limits, and packs the
// pieces into batches within a batch's.
func pack(adds []*Add, lim Limits) []Batch {
	var batches []Batch
	var cur Batch
	curItems, curBytes := 0, 0
	flush := func() {
		if len(cur) > 0 {
			batches = append(batches, cur)
		}
		cur, curItems, curBytes = nil, 0, 0
	}
	for _, a := range adds {
		base := listBytes(a.List)
		for start := 0; start < len(a.Items); {
			// The piece: as many items as fit a list's add and what is left
			// of the batch; a new batch when not one more fits.
			room := min(lim.ListItems, lim.BatchItems-curItems)
			roomBytes := min(lim.ListBytes, lim.BatchBytes-curBytes) - base
			if len(cur) == lim.BatchLists || room < 1 || roomBytes < itemBytes(a.Items[start].Value) {
				if len(cur) == 0 {
					// One item alone is past the limits: ValueBytes keeps
					// below them, so only limits set too low come here.
					room, roomBytes = 1, itemBytes(a.Items[start].Value)
				} else {
					flush()
					continue
				}
			}
			end, size := start, base
			for end < len(a.Items) && end-start < room {
				n := itemBytes(a.Items[end].Value)
				if size-base+n > roomBytes && end > start {
					break
				}
				size += n
				end++
			}
			cur = append(cur, Add{List: a.List, Items: a.Items[start:end], Rows: a.Rows[start:end], bytes: size})
			curItems += end - start
			curBytes += size
			start = end
		}
	}
	flush()
	return batches
}

// chunk is a stretch of one input's rows, written as batches: once all are
// written, every row up to end is.
type chunk struct {
	file int
	end  int64 // where its last row ends (dataio.Pos.End)
	last bool  // the input's last chunk
	// pending is how many of its batches are not written yet; guarded by
	// the tracker's lock.
	pending int
}

// tracker moves the checkpoint past chunks in the order they were read,
// as each one's batches are all written, whatever order they finish in.
type tracker struct {
	ck    *checkpoint // a leaf: calls nothing back
	mu    sync.Mutex  // guards queue and the chunks' pending
	queue []*chunk    // chunks not yet past, in the order read
}

func (t *tracker) add(c *chunk, batches int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.pending = batches
	t.queue = append(t.queue, c)
	t.advance()
}

func (t *tracker) finish(c *chunk) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.pending--
	t.advance()
}

// advance moves the checkpoint past the chunks at the queue's head that
// are written. t.mu is held.
func (t *tracker) advance() {
	for len(t.queue) > 0 && t.queue[0].pending == 0 {
		c := t.queue[0]
		t.queue[0] = nil
		t.queue = t.queue[1:]
		t.ck.advance(c.file, c.end, c.last)
	}
}
