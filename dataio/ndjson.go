package dataio

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// NDJSON: one JSON object a line, its members the row's columns; members
// of other names are skipped. version, timestamp and ttlSeconds may be
// left out or null. Blank lines are skipped.

type ndjsonReader struct {
	in      *bufio.Reader
	names   map[string]int // column name → field (ndjsonField)
	maxRow  int
	line    int64
	off     int64
	buf     []byte
	dec     jsontext.Decoder
	lineSrc bytes.Reader
}

// The fields of a row, by their place in Columns.fields.
const (
	fEntityType = iota
	fEntityID
	fFeature
	fVersion
	fValue
	fTimestamp
	fTTL
)

func newNDJSONReader(r io.Reader, cols Columns, maxRow int) *ndjsonReader {
	names := map[string]int{}
	for i, f := range cols.fields() {
		names[*f.name] = i
	}
	return &ndjsonReader{in: bufio.NewReaderSize(r, 64<<10), names: names, maxRow: maxRow}
}

func (r *ndjsonReader) Read() (Row, Pos, error) {
	for {
		line, n, err := r.readLine()
		if n == 0 && err != nil {
			return Row{}, Pos{Line: r.line, End: r.off}, err
		}
		r.line++
		r.off += n
		pos := Pos{Line: r.line, End: r.off}
		if err != nil && !errors.Is(err, io.EOF) {
			return Row{}, pos, err
		}
		if line == nil {
			return Row{}, pos, rowError(pos, "longer than %d bytes (--max-row-bytes)", r.maxRow)
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		row, reason := r.parse(line)
		if reason != "" {
			return Row{}, pos, rowError(pos, "%s", reason)
		}
		return row, pos, nil
	}
}

// readLine reads one line and says how many bytes it took; a line longer
// than maxRow is read to its end, kept nowhere, and returned as nil.
func (r *ndjsonReader) readLine() ([]byte, int64, error) {
	r.buf = r.buf[:0]
	var n int64
	tooLong := false
	for {
		chunk, err := r.in.ReadSlice('\n')
		n += int64(len(chunk))
		if !tooLong {
			if len(r.buf)+len(chunk) > r.maxRow+1 {
				tooLong, r.buf = true, r.buf[:0]
			} else {
				r.buf = append(r.buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			return nil, n, err
		}
		return r.buf, n, err
	}
}

// parse reads one row's object, or says what is wrong with it.
func (r *ndjsonReader) parse(line []byte) (Row, string) {
	r.lineSrc.Reset(line)
	r.dec.Reset(&r.lineSrc)
	var row Row
	var seen [fTTL + 1]bool
	if tok, err := r.dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return row, "not a JSON object"
	}
	for r.dec.PeekKind() != '}' {
		tok, err := r.dec.ReadToken()
		if err != nil {
			return row, "not JSON: " + err.Error()
		}
		name := tok.String()
		field, ok := r.names[name]
		if !ok {
			if err := r.dec.SkipValue(); err != nil {
				return row, "not JSON: " + err.Error()
			}
			continue
		}
		val, err := r.dec.ReadValue()
		if err != nil {
			return row, "not JSON: " + err.Error()
		}
		if val.Kind() == 'n' && field != fValue {
			continue // null: left out
		}
		seen[field] = true
		var s string
		if field != fValue && field != fTTL {
			if val.Kind() != '"' {
				return row, fmt.Sprintf("%s: must be a string", name)
			}
			b, _ := jsontext.AppendUnquote(nil, val)
			s = string(b)
		}
		switch field {
		case fEntityType:
			row.EntityType = s
		case fEntityID:
			row.EntityID = s
		case fFeature:
			row.Feature = s
		case fVersion:
			row.Version = s
		case fValue:
			row.Value = JSONValue(bytes.Clone(val))
		case fTimestamp:
			ts, err := parseTimestamp(s)
			if err != nil {
				return row, "timestamp: " + err.Error()
			}
			row.Timestamp, row.HasTimestamp = ts, true
		case fTTL:
			ttl, err := strconv.ParseInt(string(val), 10, 64)
			if err != nil || val.Kind() != '0' {
				return row, fmt.Sprintf("%s: must be a whole number of seconds", name)
			}
			row.TTLSeconds, row.HasTTL = ttl, true
		}
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return row, "not JSON: " + err.Error()
	}
	if _, err := r.dec.ReadToken(); !errors.Is(err, io.EOF) {
		return row, "more than one JSON value on the line"
	}
	for i, f := range (&Columns{}).fields() {
		if f.required && !seen[i] {
			return row, fmt.Sprintf("no %s", r.nameOf(i))
		}
	}
	return row, ""
}

func (r *ndjsonReader) nameOf(field int) string {
	for name, f := range r.names {
		if f == field {
			return name
		}
	}
	return ""
}

func (r *ndjsonReader) Close() error { return nil }

// ndjsonWriter writes rows with the default column names.
type ndjsonWriter struct {
	out *bufio.Writer
	buf []byte
}

func newNDJSONWriter(w io.Writer) *ndjsonWriter {
	return &ndjsonWriter{out: bufio.NewWriterSize(w, 64<<10)}
}

func (w *ndjsonWriter) Write(row Row) error {
	b := w.buf[:0]
	b = append(b, `{"entityType":`...)
	b = appendString(b, row.EntityType)
	b = append(b, `,"entityId":`...)
	b = appendString(b, row.EntityID)
	b = append(b, `,"feature":`...)
	b = appendString(b, row.Feature)
	b = append(b, `,"version":`...)
	b = appendString(b, row.Version)
	b = append(b, `,"value":`...)
	b, err := row.Value.appendJSON(b)
	if err != nil {
		return err
	}
	if row.HasTimestamp {
		b = append(b, `,"timestamp":"`...)
		b = appendTimestamp(b, row.Timestamp)
		b = append(b, '"')
	}
	if row.HasTTL {
		b = append(b, `,"ttlSeconds":`...)
		b = strconv.AppendInt(b, row.TTLSeconds, 10)
	}
	b = append(b, "}\n"...)
	w.buf = b
	_, err = w.out.Write(b)
	return err
}

func (w *ndjsonWriter) Close() error { return w.out.Flush() }

// appendString appends s as a JSON string; invalid UTF-8, which no row
// read holds, becomes U+FFFD.
func appendString(dst []byte, s string) []byte {
	out, err := jsontext.AppendQuote(dst, s)
	if err != nil {
		return strconv.AppendQuote(dst, s)
	}
	return out
}
