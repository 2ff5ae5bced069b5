package lists

import (
	"context"
	"fmt"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/values"
)

// What an operation's response shows is charged against MaxResponseBytes
// as each field that shows data resolves, before it is written: a page's
// items, a search's, a list of features, an error. A field past the bound
// fails, and is never written.

// chargeBytes counts n bytes of the operation's response against its
// bound.
func (s *Service) chargeBytes(ctx context.Context, n int) error {
	if req := readsFrom(ctx); req != nil && req.bytes.Add(int64(n)) > int64(s.limits.MaxResponseBytes) {
		return s.ResponseFull()
	}
	return nil
}

// charge counts the bytes of a field's items against the operation's
// response, as shown: each field that shows items is charged, aliases of
// one read too, since each writes its own copy.
func (s *Service) charge(ctx context.Context, f *store.Feature, items []store.Item, shown Shown) error {
	return s.chargeBytes(ctx, itemsBytes(f, items, shown))
}

// Shown is how a response writes each item of a field: the bytes of an
// item beyond its values and cursors (names, timestamps, punctuation), and
// how many times it writes its value and its cursor (an alias writes a
// field again, and so does a second selection of the items). The zero
// value is an item as most clients ask for it: a value, a cursor, and
// itemBytes more.
type Shown struct{ Fixed, Values, Cursors int }

// itemBytes is what an item adds to a response beyond its cursor and
// value, when the items' selection is not known: field names, timestamps,
// quotes.
const itemBytes = 96

// itemsBytes is what items add to a response: their values as written,
// escapes included, their cursors, and the rest of each item.
func itemsBytes(f *store.Feature, items []store.Item, shown Shown) int {
	if shown == (Shown{}) {
		shown = Shown{Fixed: itemBytes, Values: 1, Cursors: 1}
	}
	size := 0
	for _, it := range items {
		size += shown.Fixed + shown.Cursors*(len(it.Key)+2) + shown.Values*values.WrittenLen(f.ValueType, it.Value)
	}
	return size
}

// ShownFeature is how a response writes each feature of a field: the
// bytes of a feature beyond its strings (field names, numbers, times,
// punctuation), and how many times it writes each string whose length is
// the feature's own (an alias writes a field again).
type ShownFeature struct{ Fixed, Keys, EntityTypes, Names, Versions, Descriptions int }

// chargeFeatures counts the bytes of a field's features against the
// operation's response, as shown.
func (s *Service) chargeFeatures(ctx context.Context, fs []*store.Feature, shown ShownFeature) error {
	size := 0
	for _, f := range fs {
		entityType, name, version := quotedLen(f.EntityType), quotedLen(f.Name), quotedLen(f.Version)
		description := len("null")
		if f.Description != "" {
			description = quotedLen(f.Description)
		}
		size += shown.Fixed + shown.Keys*(entityType+name+version-4) + // "$entityType#$name|$version"
			shown.EntityTypes*entityType + shown.Names*name + shown.Versions*version + shown.Descriptions*description
	}
	return s.chargeBytes(ctx, size)
}

// quotedLen is the length of s as a response writes a String: quoted and
// escaped as gqlgen's MarshalString does, then <, >, &, U+2028 and U+2029
// escaped as encoding/json does (endpoint's writeResponse).
func quotedLen(s string) int {
	n := 2 + len(s)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\' || c == '\t' || c == '\r' || c == '\n':
			n++
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			n += 5
		case c == 0xE2 && i+2 < len(s) && s[i+1] == 0x80 && s[i+2]&^1 == 0xA8:
			n += 3
			i += 2
		}
	}
	return n
}

// ChargeEnvelope counts, against MaxResponseBytes, what the message that
// carries the response of the operation in ctx adds to it (a WebSocket
// message's type and id), before anything else: the bound is the
// message's.
func (s *Service) ChargeEnvelope(ctx context.Context, n int) {
	if req := readsFrom(ctx); req != nil {
		req.bytes.Add(int64(n))
	}
}

// ChargeError counts the bytes of an error the operation's response would
// carry against MaxResponseBytes, with its list items, and reports whether
// it fits. Once one has not, none does: past its bound a response carries
// no more error text.
func (s *Service) ChargeError(ctx context.Context, n int) bool {
	return s.chargeBytes(ctx, n) == nil
}

// ErrResponseFull is wrapped by ResponseFull.
var ErrResponseFull = fmt.Errorf("%w response", errkind.Invalid)

// ResponseFull is the error of a field past its operation's response bound,
// and the one error a response shows past it.
func (s *Service) ResponseFull() error {
	return fmt.Errorf("%w: larger than %d bytes (--max-response-bytes), its list items, features and errors counted; what does not fit is null, and its errors are left out: ask for fewer items, lists or fields", ErrResponseFull, s.limits.MaxResponseBytes)
}
