package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/listgate/listgate/load"
)

// exportProgress reports an export's progress on standard error, as load
// reports its own (load.Report): on a terminal a line redrawn in place,
// otherwise a JSON line every rep.Every; and a summary at the end. It is
// the export's callback's own: called on one goroutine, one call at a
// time.
type exportProgress struct {
	rep         load.Report
	start, last time.Time
	items       int64
	skipped     int64
}

func newExportProgress(rep load.Report) *exportProgress {
	now := time.Now()
	return &exportProgress{rep: rep, start: now, last: now}
}

func (p *exportProgress) add(items, skipped int) {
	p.items += int64(items)
	p.skipped += int64(skipped)
	every := p.rep.Every
	if p.rep.Terminal {
		every = 250 * time.Millisecond
	}
	if now := time.Now(); p.rep.W != nil && now.Sub(p.last) >= every {
		p.last = now
		p.report(now, false, 0, "")
	}
}

// report writes one progress line, or the summary when finished.
func (p *exportProgress) report(now time.Time, finished bool, features int, to string) {
	elapsed := now.Sub(p.start).Seconds()
	rate := float64(p.items) / max(elapsed, 1e-9)
	if !p.rep.Terminal {
		line := map[string]any{"time": now.UTC().Format(time.RFC3339Nano), "items": p.items, "itemsPerSecond": int64(rate),
			"elapsedSeconds": elapsed, "skipped": p.skipped}
		if finished {
			line["finished"], line["features"], line["out"] = true, features, to
		}
		b, _ := json.Marshal(line)
		p.rep.W.Write(append(b, '\n'))
		return
	}
	if !finished {
		fmt.Fprintf(p.rep.W, "\r\x1b[Kexporting: %d items, %.0f items/s, %.0f s", p.items, rate, elapsed)
		return
	}
	fmt.Fprintf(p.rep.W, "\r\x1b[Klistgate export: %d items of %d features in %.1f s (%.0f items/s) to %s\n", p.items, features, elapsed, rate, to)
	if p.skipped > 0 {
		fmt.Fprintf(p.rep.W, "listgate export: %d items left out: their stored bytes are no value of their feature's type (written by another tool), and reads leave them out too\n", p.skipped)
	}
}

// done writes the summary.
func (p *exportProgress) done(features int, to string) {
	if p.rep.W != nil {
		p.report(time.Now(), true, features, to)
	}
}
