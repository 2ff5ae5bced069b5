package dataio

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// Parquet: a flat schema of columns by the row's names, in any order;
// columns of other names are skipped. entityType, entityId, feature,
// version and value are strings (BYTE_ARRAY); timestamp is a string of RFC
// 3339, or an INT64 TIMESTAMP (of any unit, as Spark and pandas write it);
// ttlSeconds is an INT32 or INT64. version, timestamp and ttlSeconds may be
// missing, or null in a row. A Parquet file's footer comes last, so it is
// read from a file, never a stream.

type parquetReader struct {
	file   *parquet.File
	rows   *parquet.Reader
	index  [fTTL + 1]int // field → leaf column, -1 when the file has none
	tsUnit time.Duration // the unit of an INT64 timestamp column; 0: a string column
	buf    []parquet.Row
	next   int   // rows of buf not yet returned start here
	n      int   // rows in buf
	read   int64 // rows returned
	fields [fTTL + 1]parquet.Value
}

func newParquetReader(r io.ReaderAt, size int64, cols Columns) (pr *parquetReader, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("not a Parquet file the reader can read: %v", p)
		}
	}()
	f, err := parquet.OpenFile(r, size)
	if err != nil {
		return nil, fmt.Errorf("not a Parquet file: %w", err)
	}
	pr = &parquetReader{file: f, buf: make([]parquet.Row, 256)}
	schema := f.Schema()
	for i, fl := range cols.fields() {
		pr.index[i] = -1
		leaf, ok := schema.Lookup(*fl.name)
		if !ok {
			if fl.required {
				return nil, fmt.Errorf("no %s column in the file's schema (map another with --column %s=NAME)", *fl.name, fl.field)
			}
			continue
		}
		if leaf.Node.Repeated() {
			return nil, fmt.Errorf("column %s: repeated; a row's columns hold one value each", *fl.name)
		}
		kind := leaf.Node.Type().Kind()
		switch {
		case i == fTTL && (kind == parquet.Int32 || kind == parquet.Int64):
		case i == fTimestamp && kind == parquet.Int64:
			lt := leaf.Node.Type().LogicalType()
			ts, ok := (*format.TimestampType)(nil), false
			if lt != nil {
				ts, ok = lt.Value.(*format.TimestampType)
			}
			if !ok || ts.Unit.Value == nil {
				return nil, fmt.Errorf("column %s: an INT64 column must be a TIMESTAMP", *fl.name)
			}
			pr.tsUnit = ts.Unit.Value.Duration()
		case i != fTTL && kind == parquet.ByteArray:
		default:
			return nil, fmt.Errorf("column %s: of type %s, which a row's %s cannot be (see docs/load-export.md)", *fl.name, leaf.Node.Type(), fl.field)
		}
		pr.index[i] = leaf.ColumnIndex
	}
	pr.rows = parquet.NewReader(f)
	return pr, nil
}

// NumRows is how many rows the file holds.
func (r *parquetReader) NumRows() int64 { return r.file.NumRows() }

func (r *parquetReader) Read() (row Row, pos Pos, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("a corrupt Parquet file: %v", p)
		}
	}()
	if r.next == r.n {
		n, err := r.rows.ReadRows(r.buf)
		if n == 0 {
			if err == nil {
				err = io.ErrNoProgress
			}
			return Row{}, Pos{Line: r.read, End: r.read}, err
		}
		r.next, r.n = 0, n
	}
	rec := r.buf[r.next]
	r.next++
	r.read++
	pos = Pos{Line: r.read, End: r.read}
	for i := range r.fields {
		r.fields[i] = parquet.Value{}
	}
	present := [fTTL + 1]bool{}
	for _, v := range rec {
		for f, c := range r.index {
			if c == v.Column() && !v.IsNull() {
				r.fields[f], present[f] = v, true
			}
		}
	}
	str := func(f int) string { return string(r.fields[f].ByteArray()) }
	for f, fl := range (&Columns{}).fields() {
		if fl.required && !present[f] {
			return Row{}, pos, rowError(pos, "no %s (null)", fl.field)
		}
	}
	row = Row{EntityType: str(fEntityType), EntityID: str(fEntityID), Feature: str(fFeature), Value: TextValue(str(fValue))}
	if present[fVersion] {
		row.Version = str(fVersion)
	}
	if present[fTimestamp] {
		if r.tsUnit != 0 {
			n := r.fields[fTimestamp].Int64()
			ns := n * int64(r.tsUnit)
			if r.tsUnit != 1 && ns/int64(r.tsUnit) != n {
				return Row{}, pos, rowError(pos, "timestamp %d %s: out of range", n, r.tsUnit)
			}
			row.Timestamp, row.HasTimestamp = ns, true
		} else {
			ts, err := parseTimestamp(str(fTimestamp))
			if err != nil {
				return Row{}, pos, rowError(pos, "timestamp: %v", err)
			}
			row.Timestamp, row.HasTimestamp = ts, true
		}
	}
	if present[fTTL] {
		row.TTLSeconds, row.HasTTL = r.fields[fTTL].Int64(), true
	}
	return row, pos, nil
}

func (r *parquetReader) Close() error { return r.rows.Close() }

// parquetRow is a row as the Parquet writer writes it.
type parquetRow struct {
	EntityType string `parquet:"entityType,dict"`
	EntityID   string `parquet:"entityId"`
	Feature    string `parquet:"feature,dict"`
	Version    string `parquet:"version,dict"`
	Value      string `parquet:"value"`
	Timestamp  string `parquet:"timestamp"`
	TTLSeconds *int64 `parquet:"ttlSeconds,optional"`
}

// parquetWriter writes rows in row groups, buffering a batch at a time.
type parquetWriter struct {
	out  *parquet.GenericWriter[parquetRow]
	rows []parquetRow
	ttls []int64
	buf  []byte
}

const parquetBatch = 1024

// parquetRowGroup bounds the rows of one row group: parquet-go keeps a
// row group's pages in memory until it is written, by default one group
// for the whole file, so that an export of any size would hold all of it.
const parquetRowGroup = 100_000

func newParquetWriter(w io.Writer) *parquetWriter {
	return &parquetWriter{out: parquet.NewGenericWriter[parquetRow](w, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(parquetRowGroup)),
		rows: make([]parquetRow, 0, parquetBatch), ttls: make([]int64, parquetBatch)}
}

func (w *parquetWriter) Write(row Row) error {
	if !row.HasTimestamp {
		return errors.New("a row without a timestamp: the Parquet writer writes every row's")
	}
	text, err := row.Value.appendText(w.buf[:0])
	if err != nil {
		return err
	}
	w.buf = text
	pr := parquetRow{EntityType: row.EntityType, EntityID: row.EntityID, Feature: row.Feature, Version: row.Version,
		Value: string(text), Timestamp: string(appendTimestamp(nil, row.Timestamp))}
	if row.HasTTL {
		w.ttls[len(w.rows)] = row.TTLSeconds
		pr.TTLSeconds = &w.ttls[len(w.rows)]
	}
	w.rows = append(w.rows, pr)
	if len(w.rows) == parquetBatch {
		return w.flush()
	}
	return nil
}

func (w *parquetWriter) flush() error {
	_, err := w.out.Write(w.rows)
	w.rows = w.rows[:0]
	return err
}

func (w *parquetWriter) Close() error {
	if err := w.flush(); err != nil {
		return err
	}
	return w.out.Close()
}
