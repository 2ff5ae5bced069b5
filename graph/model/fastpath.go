package model

import (
	"context"
	"io"
	"strconv"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/values"
)

// gqlgenMarshaling is the context key of WithGQLGenMarshaling.
type gqlgenMarshaling struct{}

// WithGQLGenMarshaling returns a context in which the objects graph/fastpath
// gives to writers are marshaled by gqlgen's own generated code instead, so
// that tests can compare the two byte for byte. The gateway never sets it.
func WithGQLGenMarshaling(ctx context.Context) context.Context {
	return context.WithValue(ctx, gqlgenMarshaling{}, true)
}

// GQLGenMarshaling reports whether ctx asks for gqlgen's own marshalers,
// as every context does in a build with the stockgqlgen tag: the gateway
// as stock gqlgen would serve it, which bench/ measures against.
func GQLGenMarshaling(ctx context.Context) bool {
	return stockGQLGen || ctx.Value(gqlgenMarshaling{}) != nil
}

var (
	listPageImplementors = []string{"ListPage"}
	listItemImplementors = []string{"ListItem"}
)

// WriteListPage writes a page as gqlgen's generated code does, byte for
// byte, in place of gqlgen's marshaler of ListPage (graph/fastpath puts it
// there); its items through writeListItems. ListPage is a plain struct:
// endCursor is its only nullable field, and it is null exactly when nil.
func WriteListPage(oc *graphql.OperationContext, sel ast.SelectionSet, p *ListPage) graphql.Marshaler {
	return listPage{oc: oc, page: p, fields: graphql.CollectFields(oc, sel, listPageImplementors)}
}

// PageSelection is a page's selection collected once, with its items'
// selections: for a compiled document, whose fields do not depend on its
// variables (graph.Compile), when it is compiled.
type PageSelection struct {
	fields []graphql.CollectedField
	items  [][]graphql.CollectedField // of each field, its items' fields when it is items
	shown  lists.Shown                // ShownItems of the page
}

// CollectPage collects a page's selection as WriteListPage does.
func CollectPage(oc *graphql.OperationContext, sel ast.SelectionSet) PageSelection {
	s := PageSelection{fields: graphql.CollectFields(oc, sel, listPageImplementors)}
	s.items = make([][]graphql.CollectedField, len(s.fields))
	for i, f := range s.fields {
		if f.Name == "items" {
			s.items[i] = graphql.CollectFields(oc, f.Selections, listItemImplementors)
			shown := shownItem(oc, f.Selections)
			s.shown.Fixed, s.shown.Values, s.shown.Cursors = s.shown.Fixed+shown.Fixed, s.shown.Values+shown.Values, s.shown.Cursors+shown.Cursors
		}
	}
	return s
}

// Write writes a page of this selection, as WriteListPage does.
func (s PageSelection) Write(p *ListPage) graphql.Marshaler {
	return listPage{page: p, fields: s.fields, items: s.items}
}

type listPage struct {
	oc     *graphql.OperationContext // collects the items' fields when items is nil
	page   *ListPage
	fields []graphql.CollectedField
	items  [][]graphql.CollectedField
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
			if m.items != nil {
				listItems{n: len(m.page.Items), item: m.page.item, fields: m.items[i]}.MarshalGQL(w)
			} else {
				writeListItems(m.oc, f.Selections, m.page.Items).MarshalGQL(w)
			}
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

// writeListItems writes a list of items exactly as gqlgen's generated code
// does, byte for byte, but without a goroutine, a context and a field
// context for every item and field (PERFORMANCE.md): the selection is
// collected once for the whole list, and each item is appended to one
// buffer. This is sound because ListItem is a plain struct: no field has a
// resolver or a directive, and its one nullable field (position) is null
// exactly when nil, so nothing can fail, be
// intercepted or be deferred per field.
func writeListItems(oc *graphql.OperationContext, sel ast.SelectionSet, items []ListItem) graphql.Marshaler {
	return listItems{n: len(items), item: func(i int) *ListItem { return &items[i] }, fields: graphql.CollectFields(oc, sel, listItemImplementors)}
}

// item is the page's item i.
func (p *ListPage) item(i int) *ListItem { return &p.Items[i] }

// WriteNullableListItems writes a list of items that may be null
// ([ListItem]) as gqlgen's generated code does, byte for byte, in place of
// gqlgen's marshaler of [ListItem] (graph/fastpath puts it there): null
// for a nil list and for a nil item.
func WriteNullableListItems(oc *graphql.OperationContext, sel ast.SelectionSet, items []*ListItem) graphql.Marshaler {
	if items == nil {
		return graphql.Null
	}
	return listItems{n: len(items), item: func(i int) *ListItem { return items[i] }, fields: graphql.CollectFields(oc, sel, listItemImplementors)}
}

type listItems struct {
	n      int
	item   func(i int) *ListItem // nil for a null item
	fields []graphql.CollectedField
}

func (m listItems) MarshalGQL(w io.Writer) {
	var scratch [512]byte
	b := append(scratch[:0], '[')
	for i := range m.n {
		if i > 0 {
			b = append(b, ',')
		}
		it := m.item(i)
		if it == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '{')
		for j := range m.fields {
			f := &m.fields[j]
			if j > 0 {
				b = append(b, ',')
			}
			b = append(appendQuoted(b, f.Alias), ':')
			switch f.Name {
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
			case "position":
				if it.Position == nil {
					b = append(b, "null"...)
				} else {
					b = appendQuoted(b, *it.Position)
				}
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

// AppendJSON appends the time as a JSON string: RFC 3339 in UTC with the
// fraction of its second cut of trailing zeros, exactly as
// time.Time.AppendFormat(time.RFC3339Nano) writes it, in a fraction of
// its time (the items path writes two per item).
func (t Time) AppendJSON(b []byte) []byte {
	ns := int64(t)
	secs, frac := ns/1e9, ns%1e9
	if frac < 0 {
		secs, frac = secs-1, frac+1e9
	}
	days, sod := secs/86400, secs%86400
	if sod < 0 {
		days, sod = days-1, sod+86400
	}
	y, m, d := civil(days)
	if y < 1000 || y > 9999 {
		b = append(b, '"')
		b = time.Unix(0, ns).UTC().AppendFormat(b, time.RFC3339Nano)
		return append(b, '"')
	}
	b = append(b, '"')
	b = append4(b, int(y))
	b = append(b, '-')
	b = append2(b, int(m))
	b = append(b, '-')
	b = append2(b, int(d))
	b = append(b, 'T')
	b = append2(b, int(sod/3600))
	b = append(b, ':')
	b = append2(b, int(sod/60%60))
	b = append(b, ':')
	b = append2(b, int(sod%60))
	if frac != 0 {
		var digits [10]byte
		digits[0] = '.'
		for i := 9; i >= 1; i-- {
			digits[i] = byte('0' + frac%10)
			frac /= 10
		}
		n := 10
		for digits[n-1] == '0' {
			n--
		}
		b = append(b, digits[:n]...)
	}
	return append(b, 'Z', '"')
}

// civil converts days since 1970-01-01 to a proleptic Gregorian date
// (Howard Hinnant's days_from_civil, inverted).
func civil(days int64) (year, month, day int64) {
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	day = doy - (153*mp+2)/5 + 1
	month = mp + 3
	if month > 12 {
		month -= 12
	}
	year = yoe + era*400
	if month <= 2 {
		year++
	}
	return year, month, day
}

func append2(b []byte, n int) []byte { return append(b, byte('0'+n/10), byte('0'+n%10)) }

func append4(b []byte, n int) []byte {
	return append(b, byte('0'+n/1000), byte('0'+n/100%10), byte('0'+n/10%10), byte('0'+n%10))
}

// plainByte marks the bytes gqlgen writes into a quoted string unchanged.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '\\' && c != '"'
	}
	return t
}()

// appendQuoted quotes s as gqlgen's graphql.MarshalString does.
func appendQuoted(b []byte, s string) []byte {
	const hex = "0123456789ABCDEF"
	b = append(b, '"')
	for {
		i := 0
		for i < len(s) && plainByte[s[i]] {
			i++
		}
		b = append(b, s[:i]...)
		if i == len(s) {
			return append(b, '"')
		}
		switch c := s[i]; c {
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
		s = s[i+1:]
	}
}

// ShownItems is how the response writes each item of the field in ctx (a
// ListPage, or a list of ListItem), as writeListItems writes it, for the
// response's byte budget: each field the selection names, under its
// alias, once per selection of the items. It is the zero lists.Shown,
// which counts each item as most clients show it, when the field shows no
// items: what it read is charged all the same.
func ShownItems(ctx context.Context) lists.Shown {
	if s, ok := ctx.Value(shownKey{}).(*PageSelection); ok {
		return s.shown // collected when its document was compiled
	}
	oc := graphql.GetOperationContext(ctx)
	field := graphql.GetFieldContext(ctx).Field
	if field.Definition.Type.Name() != "ListPage" {
		return shownItem(oc, field.Selections)
	}
	var shown lists.Shown
	for _, f := range graphql.CollectFields(oc, field.Selections, listPageImplementors) {
		if f.Name == "items" {
			s := shownItem(oc, f.Selections)
			shown.Fixed, shown.Values, shown.Cursors = shown.Fixed+s.Fixed, shown.Values+s.Values, shown.Cursors+s.Cursors
		}
	}
	return shown
}

// shownKey is the context key of WithSelection.
type shownKey struct{}

// WithSelection returns a context in which ShownItems is the page
// selection s's, collected once, not the field's collected again.
func WithSelection(ctx context.Context, s *PageSelection) context.Context {
	return context.WithValue(ctx, shownKey{}, s)
}

// shownItem is how one selection of an item writes it.
func shownItem(oc *graphql.OperationContext, sel ast.SelectionSet) lists.Shown {
	shown := lists.Shown{Fixed: len("{},")}
	for _, f := range graphql.CollectFields(oc, sel, listItemImplementors) {
		shown.Fixed += len(f.Alias) + len(`"":,`)
		switch f.Name {
		case "value":
			shown.Values++
		case "cursor":
			shown.Cursors++
		default:
			shown.Fixed += shownFieldBytes
		}
	}
	return shown
}

// shownFieldBytes is the most an item's field other than its value and
// cursor, or a feature's other than its strings, writes: a quoted RFC 3339
// time with nanoseconds (32), a position (null in a page), a number, its
// type's name.
const shownFieldBytes = 40
