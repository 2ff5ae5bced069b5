// Package dataio reads and writes the rows of list items that listgate load
// reads and listgate export writes, in NDJSON, CSV and Parquet. A row is
// one item of one list, its columns named as the GraphQL input names them
// (entityType, entityId, feature, version, value, timestamp, ttlSeconds);
// Columns maps other names to these. It knows nothing of stores or
// gateways: a row's value stays as the file holds it until the feature's
// value type is known (Value.Input), and a writer writes exactly what a
// reader reads back. docs/load-export.md is the format's spec.
package dataio

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/listgate/listgate/graph/model"
)

// Row is one list item as a file holds it.
type Row struct {
	EntityType string
	EntityID   string
	Feature    string
	Version    string // "" when the file leaves it out
	Value      Value
	// Timestamp is the item's timestamp, ns since the Unix epoch, when
	// HasTimestamp.
	Timestamp    int64
	HasTimestamp bool
	// TTLSeconds is the row's TTL, when HasTTL. An item lives its
	// feature's TTL past its timestamp; a row's TTL can only repeat it.
	TTLSeconds int64
	HasTTL     bool
}

// Pos is where a row is in its file.
type Pos struct {
	// Line is the row's line, from 1 (a CSV header is line 1; a CSV row
	// spanning lines is at its first); in Parquet, the row's number,
	// from 1.
	Line int64
	// End is where the next row starts: a byte offset in NDJSON and CSV,
	// the rows read so far in Parquet. Skipping the rows whose End is at
	// most a checkpoint's resumes a file there.
	End int64
}

// RowError is a row that cannot be read. A reader that returns one goes on
// with the next row.
type RowError struct {
	Pos    Pos
	Reason string
}

func (e *RowError) Error() string { return fmt.Sprintf("line %d: %s", e.Pos.Line, e.Reason) }

func rowError(pos Pos, format string, args ...any) *RowError {
	return &RowError{Pos: pos, Reason: fmt.Sprintf(format, args...)}
}

// Columns names a file's columns: the name of each of a row's fields.
type Columns struct {
	EntityType, EntityID, Feature, Version, Value, Timestamp, TTLSeconds string
}

// DefaultColumns are the names of the GraphQL input.
func DefaultColumns() Columns {
	return Columns{EntityType: "entityType", EntityID: "entityId", Feature: "feature", Version: "version",
		Value: "value", Timestamp: "timestamp", TTLSeconds: "ttlSeconds"}
}

// Map changes the names of m ("field=name", the field by its GraphQL
// name) and reports a field that is not one.
func (c *Columns) Map(m string) error {
	field, name, ok := strings.Cut(m, "=")
	if !ok || name == "" {
		return fmt.Errorf("column mapping %q: must be FIELD=NAME, e.g. entityId=user_id", m)
	}
	for _, f := range c.fields() {
		if f.field == field {
			*f.name = name
			return nil
		}
	}
	return fmt.Errorf("column mapping %q: %q is not a row's field: they are entityType, entityId, feature, version, value, timestamp and ttlSeconds", m, field)
}

type columnField struct {
	field    string
	name     *string
	required bool
}

func (c *Columns) fields() []columnField {
	return []columnField{
		{"entityType", &c.EntityType, true}, {"entityId", &c.EntityID, true}, {"feature", &c.Feature, true},
		{"version", &c.Version, false}, {"value", &c.Value, true}, {"timestamp", &c.Timestamp, false},
		{"ttlSeconds", &c.TTLSeconds, false},
	}
}

// Format is a file format.
type Format string

const (
	NDJSON  Format = "ndjson"
	CSV     Format = "csv"
	Parquet Format = "parquet"
)

// ParseFormat reads a --format flag's value.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(s)); f {
	case NDJSON, CSV, Parquet:
		return f, nil
	case "jsonl":
		return NDJSON, nil
	}
	return "", fmt.Errorf("format %q: must be ndjson, csv or parquet", s)
}

// FormatOf is the format a file's name says: .ndjson, .jsonl, .json,
// .csv or .parquet.
func FormatOf(name string) (Format, bool) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".ndjson", ".jsonl", ".json":
		return NDJSON, true
	case ".csv":
		return CSV, true
	case ".parquet", ".pq":
		return Parquet, true
	}
	return "", false
}

// parseTimestamp reads an RFC 3339 timestamp as a GraphQL Time is read.
func parseTimestamp(s string) (int64, error) {
	var t model.Time
	if err := t.UnmarshalGQL(s); err != nil {
		return 0, err
	}
	return int64(t), nil
}

// appendTimestamp writes a timestamp as the gateway writes a Time: RFC
// 3339 with nanoseconds, in UTC, without quotes.
func appendTimestamp(dst []byte, ts int64) []byte {
	n := len(dst)
	dst = model.Time(ts).AppendJSON(dst)
	copy(dst[n:], dst[n+1:len(dst)-1])
	return dst[:len(dst)-2]
}

// Reader reads rows, one at a time.
type Reader interface {
	// Read returns the next row and where it is; io.EOF after the last.
	// A *RowError is a row that cannot be read, and the next Read goes
	// on after it; any other error ends the file.
	Read() (Row, Pos, error)
	Close() error
}

// DefaultMaxRowBytes bounds a row of NDJSON or CSV by default.
const DefaultMaxRowBytes = 1 << 20

// NewReader reads rows in format f from r, their columns named by cols. A
// row of NDJSON or CSV may take maxRowBytes: a longer NDJSON line is a
// RowError, a longer CSV row ends the file. Parquet needs r to be a file
// (an io.ReaderAt and io.Seeker), whose footer it reads first.
func NewReader(f Format, r io.Reader, cols Columns, maxRowBytes int) (Reader, error) {
	switch f {
	case NDJSON:
		return newNDJSONReader(r, cols, maxRowBytes), nil
	case CSV:
		return newCSVReader(r, cols, maxRowBytes)
	case Parquet:
		ra, ok := r.(interface {
			io.ReaderAt
			io.Seeker
		})
		if !ok {
			return nil, errors.New("Parquet is read from a file, not a stream: its footer comes last")
		}
		size, err := ra.Seek(0, io.SeekEnd)
		if err != nil {
			return nil, err
		}
		return newParquetReader(ra, size, cols)
	}
	return nil, fmt.Errorf("format %q: must be ndjson, csv or parquet", f)
}

// Writer writes rows, with the default column names. Close writes what
// is buffered (and Parquet's footer); it does not close the writer under.
type Writer interface {
	Write(Row) error
	Close() error
}

// NewWriter writes rows in format f to w.
func NewWriter(f Format, w io.Writer) (Writer, error) {
	switch f {
	case NDJSON:
		return newNDJSONWriter(w), nil
	case CSV:
		return newCSVWriter(w), nil
	case Parquet:
		return newParquetWriter(w), nil
	}
	return nil, fmt.Errorf("format %q: must be ndjson, csv or parquet", f)
}
