// What a hub is built from, and the bounds that cannot work with a
// store's limits. No state: read once, by New.

package watch

import (
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// Config is what a Hub is built from.
type Config struct {
	Store    store.Store
	MaxLists int // lists watched at once by this process
	// MaxCatchUp bounds the items a subscription may be sent before its
	// live items (by since, or from a position).
	MaxCatchUp int
	// CatchUpBytes bounds the bytes of the catch-up pages all
	// subscriptions hold at once; CatchUpPage is the items of one page.
	CatchUpBytes int64
	CatchUpPage  int
	// CatchUpShare is the share of CatchUpBytes one caller's
	// subscriptions may hold (0: all), at least one page: past it they
	// wait, holding none, and other callers' do not.
	CatchUpShare float64
	// SubscriptionBytes is how far behind, in bytes of items, a
	// subscription may fall: past it for SlowAfter, it is ended
	// (ErrTooSlow), as is one that holds a catch-up page its client does
	// not read from for SlowAfter.
	SubscriptionBytes int64
	SlowAfter         time.Duration
	// ReadTimeout bounds a store read of one catch-up page: past it, the
	// subscription is ended UNAVAILABLE, naming where to resume. SlowAfter
	// runs only once the page is handed over: a slow store is not its
	// client's fault.
	ReadTimeout time.Duration
	// ListBytes and TotalBytes bound the items kept for one list, and for
	// every list: past them the subscriptions furthest behind are ended.
	ListBytes, TotalBytes int64
	// Current says whether a watched list's feature is still the one
	// subscribed to (nil: it is): one deleted or created again since ends
	// its subscriptions with the error. It is called with no lock held.
	Current func(store.List) error
	// Check is run every Tick: what ends slow subscriptions and those of
	// features deleted, when no add comes.
	Tick  time.Duration
	Meter metric.Meter
	Log   *slog.Logger
}

// Defaults are the settings a zero field of Config takes.
var Defaults = Config{MaxLists: 10_000, MaxCatchUp: 100_000, CatchUpBytes: 64 << 20, CatchUpPage: 100,
	SubscriptionBytes: 8 << 20, SlowAfter: 10 * time.Second, ReadTimeout: 10 * time.Second, ListBytes: 64 << 20, TotalBytes: 512 << 20, Tick: time.Second}

// CheckBounds refuses bounds that cannot work with a store's limits,
// naming the flag to raise: catch-up bytes that cannot hold one page (no
// catch-up could start), a list's bound below one add (an add would end
// every subscription of its list), or a total below one list's.
func CheckBounds(l store.Limits, page int, catchUp, list, total int64) error {
	if need := PageNeed(page, l); catchUp < need {
		return fmt.Errorf("--catch-up-bytes %d: less than one catch-up page may hold (%d bytes: %d items of --max-value-bytes, or one add of --max-add-bytes); no catch-up could start", catchUp, need, page)
	}
	if add := AddNeed(l); list < add {
		return fmt.Errorf("--watched-list-bytes %d: less than one add may hold (%d bytes: --max-add-bytes, and %d bytes an item for --max-add-items); one add would end every subscription of its list", list, add, entryOverhead)
	}
	if total < list {
		return fmt.Errorf("--subscription-memory %d: less than --watched-list-bytes %d", total, list)
	}
	return nil
}

// PageNeed is what one catch-up page may hold, at worst: page items of
// the largest value, or one add of the largest size.
func PageNeed(page int, l store.Limits) int64 {
	return max(int64(page)*int64(l.MaxValueBytes+keys.ItemKeyLen+entryOverhead), AddNeed(l))
}

// AddNeed is what one add's items may weigh in a buffer, at worst.
func AddNeed(l store.Limits) int64 {
	return int64(l.MaxAddBytes) + int64(l.MaxAddItems)*entryOverhead
}
