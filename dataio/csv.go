package dataio

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// CSV (RFC 4180): a header row names the columns, in any order; columns of
// other names are skipped. version, timestamp and ttlSeconds may be
// missing, or empty in a row.

type csvReader struct {
	in     *csv.Reader
	lim    *rowLimit
	index  [fTTL + 1]int // field → column, -1 when the file has none
	width  int
	maxRow int
	line   int64 // of the last row read
}

func newCSVReader(r io.Reader, cols Columns, maxRow int) (*csvReader, error) {
	lim := &rowLimit{r: r, max: int64(maxRow)}
	in := csv.NewReader(lim)
	in.ReuseRecord = true
	in.FieldsPerRecord = -1
	header, err := in.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("no header row: a CSV file's first row names its columns")
	}
	if err != nil {
		return nil, fmt.Errorf("the header row: %w", err)
	}
	headerLine, _ := in.FieldPos(0)
	c := &csvReader{in: in, lim: lim, maxRow: maxRow, width: len(header), line: int64(headerLine)}
	for i, f := range cols.fields() {
		c.index[i] = -1
		for j, h := range header {
			if h == *f.name {
				c.index[i] = j
			}
		}
		if f.required && c.index[i] < 0 {
			return nil, fmt.Errorf("no %s column in the header row %q (map another with --column %s=NAME)", *f.name, strings.Join(header, ","), f.field)
		}
	}
	lim.mark(in.InputOffset())
	return c, nil
}

func (c *csvReader) Read() (Row, Pos, error) {
	rec, err := c.in.Read()
	end := c.in.InputOffset()
	c.lim.mark(end)
	var parseErr *csv.ParseError
	switch {
	case errors.Is(err, errRowTooLong):
		return Row{}, Pos{End: end}, fmt.Errorf("the row after line %d: %w", c.line, err)
	case errors.As(err, &parseErr):
		// A row the reader cannot split: where it ends is only a guess, so
		// the file cannot be trusted past it.
		return Row{}, Pos{Line: int64(parseErr.StartLine), End: end}, fmt.Errorf("not CSV: %w", err)
	case err != nil:
		return Row{}, Pos{End: end}, err
	}
	line, _ := c.in.FieldPos(0)
	c.line = int64(line)
	pos := Pos{Line: c.line, End: end}
	if len(rec) != c.width {
		return Row{}, pos, rowError(pos, "%d columns, where the header row has %d", len(rec), c.width)
	}
	field := func(f int) (string, bool) {
		i := c.index[f]
		if i < 0 {
			return "", false
		}
		return rec[i], rec[i] != ""
	}
	var row Row
	for f := fEntityType; f <= fTTL; f++ {
		s, ok := field(f)
		switch f {
		case fEntityType:
			row.EntityType = s
		case fEntityID:
			row.EntityID = s
		case fFeature:
			row.Feature = s
		case fVersion:
			row.Version = s
		case fValue:
			row.Value = TextValue(s)
		case fTimestamp:
			if ok {
				ts, err := parseTimestamp(s)
				if err != nil {
					return Row{}, pos, rowError(pos, "timestamp: %v", err)
				}
				row.Timestamp, row.HasTimestamp = ts, true
			}
		case fTTL:
			if ok {
				ttl, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					return Row{}, pos, rowError(pos, "ttlSeconds %q: must be a whole number of seconds", s)
				}
				row.TTLSeconds, row.HasTTL = ttl, true
			}
		}
	}
	// Strings were reused by ReuseRecord: copy what the row keeps.
	row.EntityType, row.EntityID = strings.Clone(row.EntityType), strings.Clone(row.EntityID)
	row.Feature, row.Version = strings.Clone(row.Feature), strings.Clone(row.Version)
	row.Value.text = strings.Clone(row.Value.text)
	return row, pos, nil
}

func (c *csvReader) Close() error { return nil }

var errRowTooLong = errors.New("a row longer than --max-row-bytes")

// rowLimit bounds the bytes one CSV row may take: encoding/csv reads a
// whole row, however long, before it returns it.
type rowLimit struct {
	r     io.Reader
	max   int64
	read  int64 // bytes read from r
	start int64 // where the row being read starts
}

// mark says where the next row starts.
func (l *rowLimit) mark(off int64) { l.start = off }

func (l *rowLimit) Read(p []byte) (int, error) {
	// The reader reads ahead by at most its buffer (4 KiB), so a row is
	// refused only past max and that.
	if l.read-l.start > l.max+64<<10 {
		return 0, errRowTooLong
	}
	n, err := l.r.Read(p)
	l.read += int64(n)
	return n, err
}

// csvWriter writes a header row of the default names, then the rows.
type csvWriter struct {
	out    *csv.Writer
	header bool
	rec    []string
	buf    []byte
}

func newCSVWriter(w io.Writer) *csvWriter {
	return &csvWriter{out: csv.NewWriter(w), rec: make([]string, 7)}
}

func (w *csvWriter) Write(row Row) error {
	if !w.header {
		c := DefaultColumns()
		if err := w.out.Write([]string{c.EntityType, c.EntityID, c.Feature, c.Version, c.Value, c.Timestamp, c.TTLSeconds}); err != nil {
			return err
		}
		w.header = true
	}
	text, err := row.Value.appendText(w.buf[:0])
	if err != nil {
		return err
	}
	w.buf = text
	// encoding/csv reads a quoted "\r\n" back as "\n": such a value cannot
	// travel in CSV unchanged.
	for _, s := range []string{row.EntityID, row.Version, string(text)} {
		if strings.Contains(s, "\r") {
			return errors.New("a field holds a carriage return, which CSV does not keep: write NDJSON or Parquet")
		}
	}
	w.rec[0], w.rec[1], w.rec[2], w.rec[3] = row.EntityType, row.EntityID, row.Feature, row.Version
	w.rec[4] = string(text)
	w.rec[5], w.rec[6] = "", ""
	if row.HasTimestamp {
		w.rec[5] = string(appendTimestamp(nil, row.Timestamp))
	}
	if row.HasTTL {
		w.rec[6] = strconv.FormatInt(row.TTLSeconds, 10)
	}
	return w.out.Write(w.rec)
}

func (w *csvWriter) Close() error {
	if !w.header {
		c := DefaultColumns()
		w.out.Write([]string{c.EntityType, c.EntityID, c.Feature, c.Version, c.Value, c.Timestamp, c.TTLSeconds})
	}
	w.out.Flush()
	return w.out.Error()
}
