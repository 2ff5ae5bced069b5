// Package model holds the GraphQL types: the plain structs bound by hand in
// gqlgen.yml (kept free of field resolvers, so the items path stays cheap),
// the ones gqlgen generates in models_gen.go, and the conversions between
// them and the lists service's arguments and answers.
package model

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/values"
)

// Time is the Time scalar: nanoseconds since the Unix epoch, written as
// RFC 3339 with nanoseconds in UTC.
type Time int64

// TimeOf converts a time.Time.
func TimeOf(t time.Time) Time { return Time(t.UnixNano()) }

// Earliest and latest instants a Time holds (nanoseconds in an int64).
var (
	minTime = time.Unix(0, -1<<63).UTC()
	maxTime = time.Unix(0, 1<<63-1).UTC()
)

// MarshalGQL writes the time as a JSON string.
func (t Time) MarshalGQL(w io.Writer) {
	var buf [40]byte
	w.Write(t.AppendJSON(buf[:0]))
}

// UnmarshalGQL reads an RFC 3339 string.
func (t *Time) UnmarshalGQL(v any) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("%w Time: must be an RFC 3339 string such as \"2024-08-29T16:44:05.43Z\"", errkind.Invalid)
	}
	parsed, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("%w Time %s: not an RFC 3339 date-time such as \"2024-08-29T16:44:05.43Z\"", errkind.Invalid, strconv.Quote(s))
	}
	if fractionDigits(s) > 9 {
		// time.Parse would drop the digits past the nanosecond.
		return fmt.Errorf("%w Time %s: more than 9 fractional digits; a Time holds nanoseconds", errkind.Invalid, strconv.Quote(s))
	}
	if parsed.Before(minTime) || parsed.After(maxTime) {
		return fmt.Errorf("%w Time %s: out of range (%s to %s)", errkind.Invalid, strconv.Quote(s), minTime.Format(time.RFC3339), maxTime.Format(time.RFC3339))
	}
	*t = Time(parsed.UnixNano())
	return nil
}

// fractionDigits counts the digits after the seconds of an RFC 3339 time.
func fractionDigits(s string) int {
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		return 0
	}
	n := 0
	for _, c := range []byte(s[dot+1:]) {
		if c < '0' || c > '9' {
			break
		}
		n++
	}
	return n
}

// ListItem is one item of a list.
type ListItem struct {
	Value     values.Value
	Timestamp Time
	ExpiresAt Time
	Cursor    string
}

// ListPage is a page of a list, newest first.
type ListPage struct {
	Items     []ListItem
	HasMore   bool
	EndCursor *string
}

// Entity is an entity of some type.
type Entity struct {
	Type     string
	EntityID string
}

// ID is the entity's global id, "$type:$entityId".
func (e Entity) ID() string { return e.Type + ":" + e.EntityID }

// What the resolvers hand to the lists service, and what they make of its
// answers.

// Ref is the list a reference names.
func (r ListRefInput) Ref() lists.Ref {
	return lists.Ref{EntityType: r.EntityType, EntityID: r.EntityID, Feature: r.Feature, Version: deref(r.Version)}
}

// NewItems are the items to add.
func NewItems(in []ListItemInput) []lists.NewItem {
	out := make([]lists.NewItem, len(in))
	for i, it := range in {
		out[i] = lists.NewItem{Value: it.Value, Timestamp: (*int64)(it.Timestamp)}
	}
	return out
}

// PageQuery asks for a page of an entity's list.
func PageQuery(entityType, entityID, feature string, version *string, minTimestamp *Time, limit *int32, after *string) lists.PageQuery {
	q := lists.PageQuery{
		Ref:          lists.Ref{EntityType: entityType, EntityID: entityID, Feature: feature, Version: deref(version)},
		MinTimestamp: (*int64)(minTimestamp),
		After:        after,
	}
	if limit != nil {
		n := int(*limit)
		q.Limit = &n
	}
	return q
}

// Feature is the feature to create.
func (in CreateListFeatureInput) Feature() store.Feature {
	return store.Feature{
		EntityType: in.EntityType, Name: in.Name, Version: deref(in.Version), ValueType: in.ValueType,
		TTL: time.Duration(in.TTLSeconds) * time.Second, Description: deref(in.Description),
	}
}

// TTL is a TTL argument in seconds as a duration.
func TTL(seconds *int32) *time.Duration {
	if seconds == nil {
		return nil
	}
	d := time.Duration(*seconds) * time.Second
	return &d
}

// ListFeatureOf shows a feature.
func ListFeatureOf(f *store.Feature) *ListFeature {
	out := &ListFeature{
		Key: f.Key(), EntityType: f.EntityType, Name: f.Name, Version: f.Version,
		ValueType: f.ValueType, TTLSeconds: int32(f.TTL / time.Second), CreatedAt: TimeOf(f.CreatedAt),
	}
	if f.Description != "" {
		out.Description = &f.Description
	}
	return out
}

// ListFeaturesOf shows features.
func ListFeaturesOf(fs []*store.Feature) []ListFeature {
	out := make([]ListFeature, len(fs))
	for i, f := range fs {
		out[i] = *ListFeatureOf(f)
	}
	return out
}

// ListPageOf shows a page.
func ListPageOf(p *lists.Page) *ListPage {
	out := &ListPage{Items: make([]ListItem, len(p.Items)), HasMore: p.HasMore}
	ttl := int64(p.Feature.TTL)
	for i, it := range p.Items {
		out.Items[i] = ListItem{
			Value:     values.Value{Type: p.Feature.ValueType, Bytes: it.Value},
			Timestamp: Time(it.Timestamp),
			ExpiresAt: Time(it.Timestamp + ttl),
			Cursor:    it.Key,
		}
	}
	if n := len(p.Items); n > 0 {
		out.EndCursor = &p.Items[n-1].Key
	}
	return out
}

// EntitiesOf are entities of one type.
func EntitiesOf(entityType string, ids []string) []Entity {
	out := make([]Entity, len(ids))
	for i, id := range ids {
		out[i] = Entity{Type: entityType, EntityID: id}
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
