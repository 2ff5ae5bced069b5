package model

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/99designs/gqlgen/graphql"
)

// appendQuoted quotes exactly as gqlgen's graphql.MarshalString does.
func FuzzAppendQuoted(f *testing.F) {
	for _, s := range []string{"", "1724949845430000000#XNzB/CBNGnnbihw02J6gCw==", "a\"b\\c\n\t\r\x00\x1f", "é\xff\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		graphql.MarshalString(s).MarshalGQL(&want)
		if got := appendQuoted(nil, s); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("appendQuoted(%q) = %s, want %s", s, got, want.Bytes())
		}
	})
}

func TestTimeJSON(t *testing.T) {
	for _, tc := range []struct {
		t    Time
		want string
	}{
		{0, `"1970-01-01T00:00:00Z"`},
		{1724949845430000000, `"2024-08-29T16:44:05.43Z"`},
		{1724949845430000001, `"2024-08-29T16:44:05.430000001Z"`},
	} {
		var b bytes.Buffer
		tc.t.MarshalGQL(&b)
		if b.String() != tc.want || string(tc.t.AppendJSON(nil)) != tc.want {
			t.Errorf("Time(%d) = %s, want %s", tc.t, b.String(), tc.want)
		}
		var back Time
		if err := back.UnmarshalGQL(tc.want[1 : len(tc.want)-1]); err != nil || back != tc.t {
			t.Errorf("UnmarshalGQL(%s) = %d, %v", tc.want, back, err)
		}
	}
	for _, bad := range []any{"2024-08-29", "2024-08-29 16:44:05Z", "yesterday", 5, "2400-01-01T00:00:00Z", "1600-01-01T00:00:00Z"} {
		var tm Time
		if err := tm.UnmarshalGQL(bad); err == nil {
			t.Errorf("UnmarshalGQL(%v) accepted", bad)
		}
	}
}

// Time.AppendJSON writes exactly what time.Time.AppendFormat does with
// RFC3339Nano in UTC.
func FuzzTimeAppendJSON(f *testing.F) {
	for _, ns := range []int64{0, -1, 1, 1724949845430000000, 1724949845000000001, -62135596800000000, 951782400000000000, 4102444799999999999, math.MinInt64, math.MaxInt64} {
		f.Add(ns)
	}
	f.Fuzz(func(t *testing.T, ns int64) {
		want := `"` + time.Unix(0, ns).UTC().Format(time.RFC3339Nano) + `"`
		if got := string(Time(ns).AppendJSON(nil)); got != want {
			t.Fatalf("Time(%d).AppendJSON = %s, want %s", ns, got, want)
		}
	})
}

// The Time scalar never panics; what it accepts it writes back as the same
// instant.
func FuzzTimeUnmarshal(f *testing.F) {
	for _, s := range []string{"2024-08-29T16:44:05.43Z", "2024-08-29T16:44:05+02:00", "1970-01-01T00:00:00Z", "yesterday", "", "2262-04-11T23:47:16.854775807Z", "9999-12-31T23:59:59Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var tm Time
		if err := tm.UnmarshalGQL(s); err != nil {
			return
		}
		out := string(tm.AppendJSON(nil))
		var back Time
		if err := back.UnmarshalGQL(out[1 : len(out)-1]); err != nil || back != tm {
			t.Fatalf("%q -> %d -> %s -> %d, %v", s, tm, out, back, err)
		}
	})
}
