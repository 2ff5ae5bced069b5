// Package watch delivers the items added to lists to the subscriptions
// that watch them. It follows the store's change feed (store.Follower),
// the record of every add to a live feature, while it watches any list
// (subscriptions to others are refused above it): so an item is
// delivered because it was added, whatever its timestamp, whichever
// gateway added it, and whether or not a cap or its TTL has removed it
// from the list since; a list nobody adds to costs nothing to watch.
//
// Every item delivered carries its position in the feed. A subscription
// starts after a position: the feed's head (from now on), or one a client
// received (after it, every add once, in the feed's order); what the hub
// read before it joined comes from the store (Follower.ListFeed), the rest
// from the list's buffer. With since it first reads the list itself from
// that time on.
//
// Each watched list keeps the items its slowest subscription has not read,
// once; each subscription reads them at its own pace. One that falls too
// far behind, for too long, is ended with ErrTooSlow, naming the position
// to resume from; the items kept are bounded per subscription, per list
// and in all.
//
// Catch-up pages are held within a pool of bytes (package pool) of which
// each caller holds at most its share: one caller's catch-ups that its
// clients do not read never make another caller's wait.
//
// Concurrency: one goroutine reads the feed (follow), one checks the
// lists every Tick (tick); each subscription is read by its client's
// goroutine (Next). Their shared state is guarded by Hub.mu, and nothing
// is called under it but this package's own code: never the store, never
// a callback (the store calls nothing back: it is pulled), never the pool
// (catch-up bytes let go of under it are given back once it is unlocked).
// It knows nothing of GraphQL or of value types; it must never write.
package watch
