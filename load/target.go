package load

import (
	"context"
	"time"

	"github.com/listgate/listgate/store"
)

// Target is where a load writes: a store opened directly, or a gateway.
type Target interface {
	// Feature looks a feature up, an error wrapping errkind.NotFound if
	// there is none (with the message a client would get).
	Feature(ctx context.Context, entityType, name, version string) (*store.Feature, error)
	// Limits are how the target's adds are packed.
	Limits() Limits
	// ExpiryCap is the latest expiry date the target can keep.
	ExpiryCap() time.Time
	// Write writes a batch, retrying what may succeed later, and returns
	// the adds refused for their rows (their rows are bad rows, written
	// nowhere). An error ends the load: the batch may be partly written,
	// and the next run writes it again.
	Write(ctx context.Context, b Batch) ([]Refused, error)
	Close() error
}

// Limits bound what one write of a target may hold.
type Limits struct {
	ListItems  int // items of one list's add
	ListBytes  int // bytes of one list's add (store.PrepareAdd's count)
	BatchLists int // adds of one batch
	BatchItems int // items of one batch, over its adds
	BatchBytes int // bytes of one batch, over its adds
	ValueBytes int // bytes of one value
}

// Batch is what one write holds: adds to lists, at most one per list.
type Batch []Add

// Add is the items of one list to add, and the rows they come from.
type Add struct {
	List  store.List
	Items []store.NewItem
	Rows  []RowRef // Rows[i] holds Items[i]
	bytes int      // the add's bytes as Limits count them
}

// RowRef names a row of an input: its file and line.
type RowRef struct {
	File int // the input's index
	Line int64
}

// Refused is an add of a batch refused for its rows, by its index.
type Refused struct {
	Add int
	Err error
}
