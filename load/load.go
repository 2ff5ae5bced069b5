// Package load is listgate load: it reads rows of list items from files
// (dataio's formats), checks each as an add checks its items, and writes
// them to a Target (a store opened directly, or a gateway's GraphQL
// endpoint), grouped by list into batches within the target's limits,
// several at once. It keeps a checkpoint of how far into its inputs every
// row is written, so that a load stopped anywhere and run again writes
// every row: a row written twice is the same item (its item key is its
// timestamp and value). Rows that can never be written (bad rows) are
// reported by file and line and written nowhere.
package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/listgate/listgate/dataio"
	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
	"github.com/listgate/listgate/values"
)

// Config is what a load reads, where it writes, and how.
type Config struct {
	Inputs      []string  // files, in the order they are read; "-" is Stdin
	Stdin       io.Reader // read for "-"
	Format      dataio.Format
	Columns     dataio.Columns
	MaxRowBytes int
	Target      Target
	Concurrency int // batches written at once
	// Checkpoint is the file that keeps how far the load went; "": none.
	Checkpoint string
	// StampNow gives rows without a timestamp the time they are read;
	// otherwise they are bad rows.
	StampNow bool
	// MaxErrors is how many bad rows the load goes on past; one more
	// stops it.
	MaxErrors int
	Report    Report
	Now       func() time.Time
	// ChunkItems is how many items the rows read are grouped by list
	// over before they are written (0: DefaultChunkItems): the bigger,
	// the fuller the batches of an input whose rows of one list are
	// spread apart, and the more memory a load holds.
	ChunkItems int
}

// Summary is what a load did.
type Summary struct {
	Rows    int64 // rows written (again, for a row a stopped run had written)
	Bad     int64 // bad rows
	Skipped int64 // rows an earlier run wrote, by the checkpoint
	Took    time.Duration
}

// DefaultChunkItems is a chunk's items by default.
const DefaultChunkItems = 20_000

// chunkBytes bounds the values a chunk holds.
const chunkBytes = 16 << 20

// loader is one run of a load. The reading and the grouping are the
// goroutine of Run's; workers write batches; tracker orders what they
// finish into the checkpoint.
type loader struct {
	cfg     Config
	lim     Limits
	ck      *checkpoint
	tracker tracker
	prog    *progress
	jobs    chan job
	cancel  context.CancelCauseFunc
	bad     atomic.Int64
	written atomic.Int64
	skipped atomic.Int64
}

// job is one batch to write, of a chunk.
type job struct {
	c *chunk
	b Batch
}

// ErrTooManyBadRows ends a load past --max-errors bad rows.
var ErrTooManyBadRows = errors.New("too many bad rows")

// Run loads the inputs. It returns once every row is written or reported,
// or the load stopped (ctx ended, a write failed, too many bad rows): the
// checkpoint then says where the next run starts.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	began := time.Now()
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ChunkItems < 1 {
		cfg.ChunkItems = DefaultChunkItems
	}
	if cfg.Concurrency < 1 {
		cfg.Concurrency = 1
	}
	inputs, err := statInputs(cfg.Inputs, cfg.Format)
	if err != nil {
		return Summary{}, err
	}
	ck, err := openCheckpoint(cfg.Checkpoint, inputs, cfg.StampNow)
	if err != nil {
		return Summary{}, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l := &loader{cfg: cfg, lim: cfg.Target.Limits(), ck: ck, jobs: make(chan job, cfg.Concurrency)}
	l.cancel = cancel
	l.tracker.ck = ck
	l.prog = newProgress(cfg.Report, inputs, ck)
	l.prog.start()
	var workers sync.WaitGroup
	for range cfg.Concurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			l.work(ctx)
		}()
	}
	readErr := l.read(ctx, inputs)
	close(l.jobs)
	workers.Wait()
	if readErr == nil {
		readErr = context.Cause(ctx)
	}
	saveErr := ck.save()
	sum := Summary{Rows: l.written.Load(), Bad: l.bad.Load(), Skipped: l.skipped.Load(), Took: time.Since(began)}
	l.prog.stop(sum, readErr)
	switch {
	case readErr != nil && !ck.progressed():
		// Nothing to go on from (a file that is not of its format, say):
		// no checkpoint is left.
		if err := ck.remove(); err != nil {
			return sum, errors.Join(readErr, err)
		}
		return sum, readErr
	case readErr != nil:
		if ck.path != "" {
			return sum, fmt.Errorf("%w (%s keeps where the load stopped: run the same command again to go on from there)", readErr, ck.path)
		}
		return sum, readErr
	case saveErr != nil:
		return sum, saveErr
	}
	return sum, ck.remove()
}

// read reads every input's rows past the checkpoint, and hands them to the
// workers in chunks.
func (l *loader) read(ctx context.Context, inputs []input) error {
	for i, in := range inputs {
		if l.ck.done(i) {
			continue
		}
		if err := l.readInput(ctx, i, in); err != nil {
			return err
		}
	}
	return nil
}

func (l *loader) readInput(ctx context.Context, i int, in input) error {
	src, closeSrc, err := in.open(l.cfg.Stdin)
	if err != nil {
		return err
	}
	defer closeSrc()
	r, err := dataio.NewReader(in.format, src, l.cfg.Columns, l.cfg.MaxRowBytes)
	if err != nil {
		return fmt.Errorf("%s: %w", in.name, err)
	}
	defer r.Close()
	if pr, ok := r.(interface{ NumRows() int64 }); ok {
		l.prog.setRows(i, pr.NumRows())
	}
	from := l.ck.end(i)
	g := newGrouper()
	c := &chunk{file: i, end: from}
	for {
		if err := context.Cause(ctx); err != nil {
			return err
		}
		row, pos, err := r.Read()
		var rowErr *dataio.RowError
		switch {
		case errors.Is(err, io.EOF):
			c.last = true
			return l.dispatch(ctx, c, g)
		case pos.End <= from && (err == nil || errors.As(err, &rowErr)):
			l.skipped.Add(1)
			continue // written or reported by an earlier run
		case errors.As(err, &rowErr):
			c.end = pos.End
			l.prog.readTo(i, pos.End)
			if err := l.badRow(RowRef{i, pos.Line}, rowErr.Reason); err != nil {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("%s: %w", in.name, err)
		}
		c.end = pos.End
		l.prog.readTo(i, pos.End)
		ref := RowRef{i, pos.Line}
		list, item, reason, err := l.check(ctx, row)
		if err != nil {
			return err
		}
		if reason != "" {
			if err := l.badRow(ref, reason); err != nil {
				return err
			}
			continue
		}
		g.add(list, item, ref)
		if g.items >= l.cfg.ChunkItems || g.bytes >= chunkBytes {
			if err := l.dispatch(ctx, c, g); err != nil {
				return err
			}
			g = newGrouper()
			c = &chunk{file: i, end: c.end}
		}
	}
}

// check turns a row into the list and item an add writes, as the gateway
// checks an add's items, or says why it can never be written (reason); an
// error stops the load.
func (l *loader) check(ctx context.Context, row dataio.Row) (store.List, store.NewItem, string, error) {
	if err := keys.ValidateList(row.EntityType, row.Feature, row.Version, row.EntityID); err != nil {
		return bad(err.Error())
	}
	f, err := l.cfg.Target.Feature(ctx, row.EntityType, row.Feature, row.Version)
	switch {
	case errors.Is(err, errkind.NotFound) || errors.Is(err, errkind.Invalid):
		return bad(err.Error())
	case err != nil:
		// The store or the gateway cannot say (unavailable, say): no row
		// is to blame.
		return store.List{}, store.NewItem{}, "", fmt.Errorf("looking up feature %s: %w", keys.FeatureKey(row.EntityType, row.Feature, row.Version), err)
	}
	if row.HasTTL && row.TTLSeconds != int64(f.TTL/time.Second) {
		return bad(fmt.Sprintf("ttlSeconds %d: the items of feature %s live its TTL of %d s past their timestamps, not a row's own", row.TTLSeconds, f.Key(), int64(f.TTL/time.Second)))
	}
	in, err := row.Value.Input(f.ValueType)
	if err != nil {
		return bad(err.Error())
	}
	v, err := values.Encode(f.ValueType, in)
	if err != nil {
		return bad(err.Error())
	}
	if len(v) > l.lim.ValueBytes {
		return bad(fmt.Sprintf("value of %d bytes, more than the %d allowed (--max-value-bytes)", len(v), l.lim.ValueBytes))
	}
	now := l.cfg.Now()
	ts := row.Timestamp
	if !row.HasTimestamp {
		if !l.cfg.StampNow {
			return bad("no timestamp (--stamp-now gives such rows the time they are loaded)")
		}
		ts = now.UnixNano()
	}
	_, live, err := keys.ItemTTL(ts, f.TTL, now, l.cfg.Target.ExpiryCap())
	if err != nil {
		return bad(err.Error())
	}
	if !live {
		return bad(fmt.Sprintf("expired: the items of feature %s live %d s past their timestamps, so this one (%s) has", f.Key(), int64(f.TTL/time.Second), time.Unix(0, ts).UTC().Format(time.RFC3339Nano)))
	}
	return store.List{Feature: f, EntityID: row.EntityID}, store.NewItem{Timestamp: ts, Value: v}, "", nil
}

func bad(reason string) (store.List, store.NewItem, string, error) {
	return store.List{}, store.NewItem{}, reason, nil
}

// badRow reports a bad row, and stops the load past MaxErrors of them.
func (l *loader) badRow(ref RowRef, reason string) error {
	n := l.bad.Add(1)
	l.prog.badRow(ref, reason)
	if n > int64(l.cfg.MaxErrors) {
		err := fmt.Errorf("%w: %d, more than --max-errors %d", ErrTooManyBadRows, n, l.cfg.MaxErrors)
		l.cancel(err)
		return err
	}
	return nil
}

// dispatch packs a chunk's adds into batches and queues them.
func (l *loader) dispatch(ctx context.Context, c *chunk, g *grouper) error {
	batches := pack(g.adds, l.lim)
	l.tracker.add(c, len(batches))
	for _, b := range batches {
		select {
		case l.jobs <- job{c, b}:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// work writes batches until there are no more, or the load stops.
func (l *loader) work(ctx context.Context) {
	for j := range l.jobs {
		if ctx.Err() != nil {
			continue // drained: the checkpoint stays before the chunk
		}
		refused, err := l.cfg.Target.Write(ctx, j.b)
		if err != nil {
			l.cancel(err)
			continue
		}
		rows := 0
		for _, a := range j.b {
			rows += len(a.Items)
		}
		for _, r := range refused {
			a := j.b[r.Add]
			rows -= len(a.Items)
			for _, ref := range a.Rows {
				if l.badRow(ref, r.Err.Error()) != nil {
					break
				}
			}
		}
		l.written.Add(int64(rows))
		l.prog.wrote(int64(rows))
		l.tracker.finish(j.c)
	}
}

// input is one input file.
type input struct {
	name   string
	format dataio.Format
	size   int64 // -1 for stdin
	mod    time.Time
}

// ErrNoInput is a load given no file.
var ErrNoInput = errors.New("no input: name files, or - for standard input")

func statInputs(names []string, format dataio.Format) ([]input, error) {
	if len(names) == 0 {
		return nil, ErrNoInput
	}
	var ins []input
	stdin := false
	for _, n := range names {
		in := input{name: n, format: format, size: -1}
		if in.format == "" {
			f, ok := dataio.FormatOf(n)
			if !ok {
				return nil, fmt.Errorf("%s: the name does not say its format (.ndjson, .jsonl, .csv, .parquet): give --format", n)
			}
			in.format = f
		}
		if n == "-" {
			if stdin {
				return nil, errors.New("- (standard input) named twice")
			}
			stdin = true
		} else {
			fi, err := os.Stat(n)
			if err != nil {
				return nil, err
			}
			if !fi.Mode().IsRegular() {
				return nil, fmt.Errorf("%s: not a regular file", n)
			}
			in.size, in.mod = fi.Size(), fi.ModTime()
		}
		ins = append(ins, in)
	}
	return ins, nil
}

// open opens the input; Parquet from stdin is copied to a temporary file
// first, since it is read from its end.
func (in input) open(stdin io.Reader) (io.Reader, func(), error) {
	if in.name != "-" {
		f, err := os.Open(in.name)
		if err != nil {
			return nil, nil, err
		}
		return f, func() { f.Close() }, nil
	}
	if in.format != dataio.Parquet {
		return stdin, func() {}, nil
	}
	f, err := os.CreateTemp("", "listgate-load-*.parquet")
	if err != nil {
		return nil, nil, err
	}
	remove := func() { f.Close(); os.Remove(f.Name()) }
	if _, err := io.Copy(f, stdin); err != nil {
		remove()
		return nil, nil, fmt.Errorf("copying standard input: %w", err)
	}
	return f, remove, nil
}
