package model

import (
	"io"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/listgate/listgate/values"
)

// FastMarshal selects how ListPage and [ListItem!]! are written: by
// WriteListPage and WriteListItems (true, the default), or by gqlgen's
// generated code, which tests use to prove the two byte-identical.
// graph/fastpath wires the generated marshalers to this switch.
var FastMarshal atomic.Bool

func init() { FastMarshal.Store(true) }

var (
	listPageImplementors = []string{"ListPage"}
	listItemImplementors = []string{"ListItem"}
)

// WriteListPage writes a page as gqlgen's generated code does, byte for
// byte; its items through WriteListItems. ListPage is a plain struct
// too: endCursor is its only nullable field, and it is null exactly when
// nil.
func WriteListPage(oc *graphql.OperationContext, sel ast.SelectionSet, p *ListPage) graphql.Marshaler {
	return listPage{oc: oc, page: p, fields: graphql.CollectFields(oc, sel, listPageImplementors)}
}

type listPage struct {
	oc     *graphql.OperationContext
	page   *ListPage
	fields []graphql.CollectedField
}

func (m listPage) MarshalGQL(w io.Writer) {
	var scratch [128]byte
	b := append(scratch[:0], '{')
	for i, f := range m.fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(appendQuoted(b, f.Alias), ':')
		switch f.Name {
		case "__typename":
			b = append(b, `"ListPage"`...)
		case "items":
			w.Write(b)
			WriteListItems(m.oc, f.Selections, m.page.Items).MarshalGQL(w)
			b = scratch[:0]
		case "hasMore":
			b = strconv.AppendBool(b, m.page.HasMore)
		case "endCursor":
			if m.page.EndCursor == nil {
				b = append(b, "null"...)
			} else {
				b = appendQuoted(b, *m.page.EndCursor)
			}
		}
	}
	w.Write(append(b, '}'))
}

// WriteListItems writes a list of items exactly as gqlgen's generated code
// does, byte for byte, but without a goroutine, a context and a field
// context for every item and field (PERFORMANCE.md): the selection is
// collected once for the whole list, and each item is appended to one
// buffer. This is sound because ListItem is a plain struct: no field has a
// resolver, a directive or a nullable type, so nothing can fail, be
// intercepted or be deferred per field.
func WriteListItems(oc *graphql.OperationContext, sel ast.SelectionSet, items []ListItem) graphql.Marshaler {
	fields := graphql.CollectFields(oc, sel, listItemImplementors)
	m := listItems{items: items, fields: make([]listItemField, len(fields))}
	for i, f := range fields {
		m.fields[i] = listItemField{name: f.Name, key: append(appendQuoted(nil, f.Alias), ':')}
	}
	return m
}

type listItemField struct {
	name string
	key  []byte // the quoted alias and ':'
}

type listItems struct {
	items  []ListItem
	fields []listItemField
}

func (m listItems) MarshalGQL(w io.Writer) {
	var scratch [512]byte
	b := append(scratch[:0], '[')
	for i := range m.items {
		it := &m.items[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		for j, f := range m.fields {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, f.key...)
			switch f.name {
			case "__typename":
				b = append(b, `"ListItem"`...)
			case "value":
				b = values.AppendJSON(b, it.Value.Type, it.Value.Bytes)
			case "timestamp":
				b = it.Timestamp.AppendJSON(b)
			case "expiresAt":
				b = it.ExpiresAt.AppendJSON(b)
			case "cursor":
				b = appendQuoted(b, it.Cursor)
			}
		}
		b = append(b, '}')
		if len(b) > len(scratch)/2 {
			w.Write(b)
			b = scratch[:0]
		}
	}
	w.Write(append(b, ']'))
}

// AppendJSON appends the time as a JSON string, as MarshalGQL writes it.
func (t Time) AppendJSON(b []byte) []byte {
	b = append(b, '"')
	b = time.Unix(0, int64(t)).UTC().AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// appendQuoted quotes s as gqlgen's graphql.MarshalString does.
func appendQuoted(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '\\' && c != '"' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '\t':
			b = append(b, `\t`...)
		case '\r':
			b = append(b, `\r`...)
		case '\n':
			b = append(b, `\n`...)
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
