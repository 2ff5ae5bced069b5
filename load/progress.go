package load

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Report is where and how a load reports its progress and its bad rows.
type Report struct {
	W io.Writer // standard error, as a rule; nil: nowhere
	// Terminal draws a progress bar, redrawn in place, and bad rows as
	// lines of text; otherwise each is a JSON line.
	Terminal bool
	Every    time.Duration // between JSON progress lines
}

// progress reports a load's progress. Its counters are atomic; mu guards
// the writer, so that lines never interleave.
type progress struct {
	rep    Report
	inputs []input
	ck     *checkpoint
	read   []atomic.Int64 // per input: where reading is (bytes, or Parquet rows)
	rows   []atomic.Int64 // per Parquet input: its rows
	items  atomic.Int64   // rows written
	bad    atomic.Int64
	began  time.Time
	done   chan struct{}
	ended  sync.WaitGroup
	mu     sync.Mutex
	drawn  bool // a bar is on the terminal's last line
}

func newProgress(rep Report, inputs []input, ck *checkpoint) *progress {
	if rep.W == nil {
		rep.W = io.Discard
	}
	if rep.Every <= 0 {
		rep.Every = 5 * time.Second
	}
	p := &progress{rep: rep, inputs: inputs, ck: ck, read: make([]atomic.Int64, len(inputs)),
		rows: make([]atomic.Int64, len(inputs)), began: time.Now(), done: make(chan struct{})}
	for i := range inputs {
		end, _ := ck.progressOf(i)
		p.read[i].Store(end)
	}
	return p
}

func (p *progress) start() {
	every := p.rep.Every
	if p.rep.Terminal {
		every = 250 * time.Millisecond
	}
	p.ended.Add(1)
	go func() {
		defer p.ended.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-t.C:
				p.report(false, nil)
			}
		}
	}()
}

func (p *progress) setRows(i int, n int64)  { p.rows[i].Store(n) }
func (p *progress) readTo(i int, end int64) { p.read[i].Store(end) }
func (p *progress) wrote(n int64)           { p.items.Add(n) }

// badRow reports a bad row.
func (p *progress) badRow(ref RowRef, reason string) {
	p.bad.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	name := p.inputs[ref.File].name
	if p.rep.Terminal {
		p.clearLocked()
		fmt.Fprintf(p.rep.W, "%s:%d: %s\n", name, ref.Line, reason)
		return
	}
	b, _ := json.Marshal(struct {
		File   string `json:"file"`
		Line   int64  `json:"line"`
		Reason string `json:"error"`
	}{name, ref.Line, reason})
	p.rep.W.Write(append(b, '\n'))
}

// stop writes the last report.
func (p *progress) stop(sum Summary, err error) {
	close(p.done)
	p.ended.Wait()
	p.report(true, err)
}

// fraction is how much of the inputs is read, if it can be told.
func (p *progress) fraction() (float64, bool) {
	var total, read float64
	for i, in := range p.inputs {
		size := float64(in.size)
		if in.size < 0 {
			return 0, false
		}
		at := float64(p.read[i].Load())
		if rows := p.rows[i].Load(); rows > 0 {
			at = size * at / float64(rows)
		}
		if _, done := p.ck.progressOf(i); done {
			at = size
		}
		total += size
		read += min(at, size)
	}
	if total == 0 {
		return 1, true
	}
	return read / total, true
}

func (p *progress) report(last bool, err error) {
	took := time.Since(p.began)
	items, bad := p.items.Load(), p.bad.Load()
	rate := float64(items) / max(took.Seconds(), 1e-3)
	frac, known := p.fraction()
	eta := time.Duration(-1)
	if known && frac > 0 && !last {
		eta = time.Duration(float64(took) * (1 - frac) / frac).Round(time.Second)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.rep.Terminal {
		line := struct {
			Time          string  `json:"time"`
			Items         int64   `json:"items"`
			ItemsPerSec   float64 `json:"itemsPerSecond"`
			Errors        int64   `json:"errors"`
			Done          float64 `json:"done,omitempty"`
			ETASeconds    float64 `json:"etaSeconds,omitempty"`
			Finished      bool    `json:"finished,omitempty"`
			Error         string  `json:"error,omitempty"`
			ElapsedSecond float64 `json:"elapsedSeconds"`
		}{Time: time.Now().UTC().Format(time.RFC3339), Items: items, ItemsPerSec: float64(int64(rate*10)) / 10, Errors: bad,
			Finished: last && err == nil, ElapsedSecond: took.Round(time.Millisecond).Seconds()}
		if known {
			line.Done = float64(int64(frac*1000)) / 1000
		}
		if eta >= 0 {
			line.ETASeconds = eta.Seconds()
		}
		if err != nil {
			line.Error = err.Error()
		}
		b, _ := json.Marshal(line)
		p.rep.W.Write(append(b, '\n'))
		return
	}
	const width = 30
	bar := strings.Repeat("?", width)
	pct := "  ?%"
	if known {
		n := int(frac * width)
		bar = strings.Repeat("#", n) + strings.Repeat(".", width-n)
		pct = fmt.Sprintf("%3d%%", int(frac*100))
	}
	etaText := ""
	if eta >= 0 {
		etaText = " ETA " + eta.String()
	}
	p.clearLocked()
	fmt.Fprintf(p.rep.W, "[%s] %s %d items %.0f items/s%s %d errors", bar, pct, items, rate, etaText, bad)
	p.drawn = true
	if last {
		fmt.Fprintln(p.rep.W)
		p.drawn = false
	}
}

// clearLocked clears the bar from the terminal's line. p.mu is held.
func (p *progress) clearLocked() {
	if p.drawn {
		io.WriteString(p.rep.W, "\r\033[K")
		p.drawn = false
	}
}
