package features

import "time"

// SetClock sets the clock a catalog dates its snapshots by.
func SetClock(c *Catalog, now func() time.Time) { c.now = now }
