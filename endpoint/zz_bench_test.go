package endpoint

import (
	"testing"

	"github.com/99designs/gqlgen/graphql"
	jsonv2 "github.com/go-json-experiment/json"
)

var addBody = []byte(`{"query":"mutation Add($id: ID!, $items: [ListItemInput!]!) { addListItems(list: {entityType: \"user\", entityId: $id, feature: \"h\"}, items: $items) { added } }","variables":{"id":"w123","items":[{"value":"v-1-2-3"}]}}`)

func BenchmarkDecodeParams(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var p graphql.RawParams
		if _, err := decodeParams("x", addBody, &p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodePlain(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var p graphql.RawParams
		if err := jsonv2.Unmarshal(addBody, &p); err != nil {
			b.Fatal(err)
		}
	}
}
