// Package model holds the GraphQL types: the plain structs bound by hand in
// gqlgen.yml (kept free of field resolvers, so the items path stays cheap),
// the ones gqlgen generates in models_gen.go, and the conversions between
// them and the lists service's arguments and answers.
package model

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/features"
	"github.com/listgate/listgate/lists"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/values"
	"github.com/listgate/listgate/watch"
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
		return fmt.Errorf("%w Time %s: not an RFC 3339 date-time such as \"2024-08-29T16:44:05.43Z\"", errkind.Invalid, errkind.Quote(s))
	}
	if fractionDigits(s) > 9 {
		// time.Parse would drop the digits past the nanosecond.
		return fmt.Errorf("%w Time %s: more than 9 fractional digits; a Time holds nanoseconds", errkind.Invalid, errkind.Quote(s))
	}
	if parsed.Before(minTime) || parsed.After(maxTime) {
		return fmt.Errorf("%w Time %s: out of range (%s to %s)", errkind.Invalid, errkind.Quote(s), minTime.Format(time.RFC3339), maxTime.Format(time.RFC3339))
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
	Position  *string // in a subscription, the item's place in the change feed
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
func PageQuery(entityType, entityID, feature string, version *string, minTimestamp, maxTimestamp *Time, limit *int32, after *string, distinct *bool, shown lists.Shown) lists.PageQuery {
	q := lists.PageQuery{
		Ref:      lists.Ref{EntityType: entityType, EntityID: entityID, Feature: feature, Version: deref(version)},
		Window:   lists.Window{MinTimestamp: (*int64)(minTimestamp), MaxTimestamp: (*int64)(maxTimestamp)},
		After:    after,
		Distinct: deref(distinct),
		Shown:    shown,
	}
	if limit != nil {
		n := int(*limit)
		q.Limit = &n
	}
	return q
}

// Window bounds a read or a removal by timestamp.
func Window(minTimestamp, maxTimestamp *Time) lists.Window {
	return lists.Window{MinTimestamp: (*int64)(minTimestamp), MaxTimestamp: (*int64)(maxTimestamp)}
}

// CountQuery asks how many items an entity's list holds in a window.
func CountQuery(entityType, entityID, feature string, version *string, minTimestamp, maxTimestamp *Time) lists.CountQuery {
	return lists.CountQuery{
		Ref:    lists.Ref{EntityType: entityType, EntityID: entityID, Feature: feature, Version: deref(version)},
		Window: lists.Window{MinTimestamp: (*int64)(minTimestamp), MaxTimestamp: (*int64)(maxTimestamp)},
	}
}

// HistogramQuery asks how many items an entity's list holds in each
// bucket of a window.
func HistogramQuery(entityType, entityID, feature string, version *string, minTimestamp Time, maxTimestamp *Time, bucketSeconds int32) lists.HistogramQuery {
	return lists.HistogramQuery{
		Ref:          lists.Ref{EntityType: entityType, EntityID: entityID, Feature: feature, Version: deref(version)},
		MinTimestamp: int64(minTimestamp),
		MaxTimestamp: (*int64)(maxTimestamp),
		Width:        int64(bucketSeconds) * int64(time.Second),
	}
}

// ListBuckets are a histogram's buckets as the schema has them.
func ListBuckets(bs []lists.Bucket) []ListBucket {
	out := make([]ListBucket, len(bs))
	for i, b := range bs {
		out[i] = ListBucket{Start: Time(b.Start), Count: int32(b.Count)}
	}
	return out
}

// ContainsQuery asks for the newest item of an entity's list holding each
// value.
func ContainsQuery(entityType, entityID, feature string, version *string, vs []values.Value, minTimestamp *Time, shown lists.Shown) lists.ContainsQuery {
	return lists.ContainsQuery{
		Ref:          lists.Ref{EntityType: entityType, EntityID: entityID, Feature: feature, Version: deref(version)},
		Values:       vs,
		MinTimestamp: (*int64)(minTimestamp),
		Shown:        shown,
	}
}

// WatchQuery asks for the items added to an entity's list.
func WatchQuery(entityType, entityID, feature string, version *string, since *Time, after *string) lists.WatchQuery {
	return lists.WatchQuery{
		Ref:   lists.Ref{EntityType: entityType, EntityID: entityID, Feature: feature, Version: deref(version)},
		Since: (*int64)(since),
		After: after,
	}
}

// ListAdds are the adds of a batch.
func ListAdds(in []ListAddInput) []lists.ListAdd {
	out := make([]lists.ListAdd, len(in))
	for i, a := range in {
		out[i] = lists.ListAdd{Ref: a.List.Ref(), Items: NewItems(a.Items)}
	}
	return out
}

// VersionChanges are what a new version changes.
func VersionChanges(ttlSeconds *int32, description *string, maxItems *int32) features.VersionChanges {
	ch := features.VersionChanges{TTL: TTL(ttlSeconds), Description: description}
	if maxItems != nil {
		n := int(*maxItems)
		ch.MaxItems = &n
	}
	return ch
}

// Feature is the feature to create. A cap is 1 or more, or left out: 0
// would read as no cap.
func (in CreateListFeatureInput) Feature() (store.Feature, error) {
	if in.MaxItems != nil && *in.MaxItems == 0 {
		return store.Feature{}, fmt.Errorf("%w maxItems 0: must be from 1 to %d, or left out for no cap", errkind.Invalid, store.MaxMaxItems)
	}
	return store.Feature{
		EntityType: in.EntityType, Name: in.Name, Version: deref(in.Version), ValueType: in.ValueType,
		TTL: time.Duration(in.TTLSeconds) * time.Second, Description: deref(in.Description), MaxItems: int(deref(in.MaxItems)),
		Live: deref(in.Live),
	}, nil
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
		Live: f.Live,
	}
	if f.Description != "" {
		out.Description = &f.Description
	}
	if f.MaxItems > 0 {
		n := int32(f.MaxItems)
		out.MaxItems = &n
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

var listFeatureImplementors = []string{"ListFeature"}

// ShownFeatures is how the response writes each feature of the field in
// ctx (a ListFeature, or a list of them), for the response's byte budget:
// each field the selection names, under its alias, its strings by their
// length and the rest at the most it writes.
func ShownFeatures(ctx context.Context) lists.ShownFeature {
	oc := graphql.GetOperationContext(ctx)
	shown := lists.ShownFeature{Fixed: len("{},")}
	for _, f := range graphql.CollectFields(oc, graphql.GetFieldContext(ctx).Field.Selections, listFeatureImplementors) {
		shown.Fixed += len(f.Alias) + len(`"":,`)
		switch f.Name {
		case "key":
			shown.Keys++
		case "entityType":
			shown.EntityTypes++
		case "name":
			shown.Names++
		case "version":
			shown.Versions++
		case "description":
			shown.Descriptions++
		default:
			shown.Fixed += shownFieldBytes
		}
	}
	return shown
}

// ListPageOf shows a page.
func ListPageOf(p *lists.Page) *ListPage {
	out := &ListPage{Items: make([]ListItem, len(p.Items)), HasMore: p.HasMore}
	for i := range p.Items {
		out.Items[i] = ItemOf(p.Feature, &p.Items[i])
	}
	if p.End != "" {
		out.EndCursor = &p.End
	}
	return out
}

// ItemOf shows an item of a feature.
func ItemOf(f *store.Feature, it *store.Item) ListItem {
	return ListItem{
		Value:     values.Value{Type: f.ValueType, Bytes: it.Value},
		Timestamp: Time(it.Timestamp),
		ExpiresAt: Time(it.Timestamp + int64(f.TTL)),
		Cursor:    it.Key,
	}
}

// DeliveredItemOf is an item a subscription delivers, with its position.
func DeliveredItemOf(f *store.Feature, d *watch.Delivery) ListItem {
	item := ItemOf(f, &d.Item)
	p := d.Position.String()
	item.Position = &p
	return item
}

// FoundItems shows what a search found, null where nothing was.
func FoundItems(found *lists.Found) []*ListItem {
	out := make([]*ListItem, len(found.Items))
	for i, it := range found.Items {
		if it != nil {
			item := ItemOf(found.Feature, it)
			out[i] = &item
		}
	}
	return out
}

// BatchPayloads shows the results of a batch add: a failed list is null,
// with its error at its index.
func BatchPayloads(ctx context.Context, results []lists.BatchResult) []*AddListItemsPayload {
	out := make([]*AddListItemsPayload, len(results))
	path := graphql.GetPath(ctx)
	for i, r := range results {
		if r.Err != nil {
			graphql.AddError(ctx, gqlerror.WrapPath(append(slices.Clone(path), ast.PathIndex(i)), r.Err))
			continue
		}
		out[i] = &AddListItemsPayload{Added: int32(r.Added), Expired: int32(r.Expired)}
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
