package keys

import (
	"testing"
	"time"
)

var sink string

func BenchmarkItemKey(b *testing.B) {
	b.ReportAllocs()
	v := []byte("story000123456")
	for b.Loop() {
		sink = ItemKey(1724949845430000000, v)
	}
}

func BenchmarkParseItemKey(b *testing.B) {
	b.ReportAllocs()
	k := ItemKey(1724949845430000000, []byte("story000123456"))
	for b.Loop() {
		if _, err := ParseItemKey(k); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkItemTTL(b *testing.B) {
	b.ReportAllocs()
	now := time.Now()
	ts := now.Add(-time.Hour).UnixNano()
	for b.Loop() {
		if _, _, err := ItemTTL(ts, 24*time.Hour, now, ExpiryCap2106); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateEntityID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := ValidateEntityID("user-1234567890"); err != nil {
			b.Fatal(err)
		}
	}
}
