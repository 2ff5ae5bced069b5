package lists

import (
	"context"

	"github.com/listgate/listgate/store"
)

// CheckOnly returns a context in which the service's writes only check
// their input, against the catalog and what the earlier writes under the
// same context would have created, and write nothing. A mutation
// operation runs once so, and for real only when every field passed.
func CheckOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, checkKey{}, &check{created: map[string]*store.Feature{}, deleted: map[string]bool{}})
}

// check is the state of a check run: the features its writes would create
// or delete, so that a later write sees them as it will when it runs.
type check struct {
	created map[string]*store.Feature // by feature key
	deleted map[string]bool           // by feature key
}

type checkKey struct{}

func checkFrom(ctx context.Context) *check {
	c, _ := ctx.Value(checkKey{}).(*check)
	return c
}

// checking reports whether writes only check their input.
func checking(ctx context.Context) bool { return checkFrom(ctx) != nil }

func (c *check) create(f *store.Feature) {
	c.created[f.Key()] = f
	delete(c.deleted, f.Key())
}

func (c *check) forget(key string) {
	delete(c.created, key)
	c.deleted[key] = true
}
