package keys

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/errkind"
)

func TestItemKeyFormat(t *testing.T) {
	// MD5("test") = 098f6bcd4621d373cade4e832627b4f6, in padded standard base64.
	got := ItemKey(1724949845430000000, []byte("test"))
	want := "1724949845430000000#CY9rzUYh03PK3k6DJie09g=="
	if got != want {
		t.Fatalf("ItemKey = %q, want %q", got, want)
	}
	if len(got) != ItemKeyLen {
		t.Fatalf("len = %d, want %d", len(got), ItemKeyLen)
	}
}

func TestTimestampPrefix(t *testing.T) {
	for _, tc := range []struct {
		ts   int64
		want string
	}{
		{0, "0000000000000000000"},
		{42, "0000000000000000042"},
		{1724949845430000000, "1724949845430000000"},
		{9223372036854775807, "9223372036854775807"},
	} {
		if got := TimestampPrefix(tc.ts); got != tc.want {
			t.Errorf("TimestampPrefix(%d) = %q, want %q", tc.ts, got, tc.want)
		}
		if got := ItemTimestamp(ItemKey(tc.ts, []byte("v"))); got != tc.ts {
			t.Errorf("ItemTimestamp(ItemKey(%d)) = %d", tc.ts, got)
		}
	}
}

func TestFeatureKey(t *testing.T) {
	if got := FeatureKey("user", "reading_history", ""); got != "user#reading_history|" {
		t.Errorf("got %q", got)
	}
	if got := FeatureKey("user", "story_presented", "2025/03/11"); got != "user#story_presented|2025/03/11" {
		t.Errorf("got %q", got)
	}
}

func TestParseItemKey(t *testing.T) {
	good := ItemKey(1724949845430000000, []byte("x"))
	if ts, err := ParseItemKey(good); err != nil || ts != 1724949845430000000 {
		t.Fatalf("ParseItemKey(%q) = %d, %v", good, ts, err)
	}
	for _, bad := range []string{
		"",
		"abc",
		good[:len(good)-1],
		good + "=",
		strings.Replace(good, "#", "$", 1),
		"-724949845430000000" + good[19:],
		"+724949845430000000" + good[19:],
		"17249498454300000x0" + good[19:],
		good[:20] + "!!!!!!!!!!!!!!!!!!!!!!!!",
	} {
		if _, err := ParseItemKey(bad); !errors.Is(err, errkind.Invalid) {
			t.Errorf("ParseItemKey(%q) = %v, want errkind.Invalid", bad, err)
		}
	}
}

func TestValidateIdentifiers(t *testing.T) {
	long := strings.Repeat("a", 65)
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"user", nil},
		{"reading_history", nil},
		{"a", nil},
		{"a9_", nil},
		{strings.Repeat("a", 64), nil},
		{"", errkind.Invalid},
		{long, errkind.Invalid},
		{"User", errkind.Invalid},
		{"9user", errkind.Invalid},
		{"_user", errkind.Invalid},
		{"us#er", errkind.Invalid},
		{"us|er", errkind.Invalid},
		{"us er", errkind.Invalid},
		{"usér", errkind.Invalid},
		{"user\n", errkind.Invalid},
	} {
		if err := ValidateName("entity type", tc.name); !errors.Is(err, tc.err) {
			t.Errorf("ValidateName(%q) = %v, want %v", tc.name, err, tc.err)
		}
	}
	for _, tc := range []struct {
		version string
		err     error
	}{
		{"", nil},
		{"v2", nil},
		{"2025/03/11", nil},
		{strings.Repeat("x", 64), nil},
		{strings.Repeat("x", 65), errkind.Invalid},
		{"a#b", errkind.Invalid},
		{"a|b", errkind.Invalid},
		{"a b", errkind.Invalid},
		{"a\tb", errkind.Invalid},
		{"é", errkind.Invalid},
	} {
		if err := ValidateVersion(tc.version); !errors.Is(err, tc.err) {
			t.Errorf("ValidateVersion(%q) = %v, want %v", tc.version, err, tc.err)
		}
	}
	for _, tc := range []struct {
		id  string
		err error
	}{
		{"user123", nil},
		{"u", nil},
		{"user:with#all|sorts of/chars", nil},
		{"ユーザー", nil},
		{strings.Repeat("x", 256), nil},
		{"", errkind.Invalid},
		{strings.Repeat("x", 257), errkind.Invalid},
		{"a\x00b", errkind.Invalid},
		{"a\nb", errkind.Invalid},
		{"a\x7fb", errkind.Invalid},
		{"a\u0085b", errkind.Invalid},
		{"a\xffb", errkind.Invalid},
	} {
		if err := ValidateEntityID(tc.id); !errors.Is(err, tc.err) {
			t.Errorf("ValidateEntityID(%q) = %v, want %v", tc.id, err, tc.err)
		}
	}
}

func TestItemTTL(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		name string
		ts   time.Time
		ttl  time.Duration
		cap  time.Time
		want int32
		live bool
		err  bool
	}{
		{"written now", now, day, ExpiryCap2038, 86400, true, false},
		{"an hour old", now.Add(-time.Hour), day, ExpiryCap2038, 82800, true, false},
		{"rounded up", now.Add(-time.Hour - 300*time.Millisecond), day, ExpiryCap2038, 82800, true, false},
		{"under a second left is one second", now.Add(-day + 1), day, ExpiryCap2038, 1, true, false},
		{"expires exactly now", now.Add(-day), day, ExpiryCap2038, 0, false, false},
		{"long expired", now.Add(-10 * day), day, ExpiryCap2038, 0, false, false},
		{"in the near future", now.Add(30 * time.Minute), day, ExpiryCap2038, 86400 + 1800, true, false},
		{"too far in the future", now.Add(2 * time.Hour), day, ExpiryCap2038, 0, false, true},
		{"before 1970", time.Unix(0, -1), day, ExpiryCap2038, 0, false, true},
		{"above the server maximum", now.Add(30 * time.Minute), MaxTTL, ExpiryCap2106, 0, false, true},
		{"maximum exactly", now, MaxTTL, ExpiryCap2106, int32(MaxTTL / time.Second), true, false},
		{"past the 2038 cap", now, 13 * 365 * day, ExpiryCap2038, 0, false, true},
		{"before the 2106 cap", now, 13 * 365 * day, ExpiryCap2106, 13 * 365 * 86400, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, live, err := ItemTTL(tc.ts.UnixNano(), tc.ttl, now, tc.cap)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err != nil && !errors.Is(err, errkind.Invalid) {
				t.Fatalf("err = %v, want errkind.Invalid", err)
			}
			if got != tc.want || live != tc.live {
				t.Fatalf("ItemTTL = %d, %v; want %d, %v", got, live, tc.want, tc.live)
			}
		})
	}
}

func TestValidateFeatureTTL(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		ttl time.Duration
		cap time.Time
		ok  bool
	}{
		{time.Second, ExpiryCap2038, true},
		{30 * 24 * time.Hour, ExpiryCap2038, true},
		{MaxTTL, ExpiryCap2106, true},
		{0, ExpiryCap2106, false},
		{-time.Second, ExpiryCap2106, false},
		{1500 * time.Millisecond, ExpiryCap2106, false},
		{MaxTTL + time.Second, ExpiryCap2106, false},
		{MaxTTL, ExpiryCap2038, false},
	} {
		err := ValidateFeatureTTL(tc.ttl, now, tc.cap)
		if (err == nil) != tc.ok {
			t.Errorf("ValidateFeatureTTL(%v, cap %v) = %v, want ok %v", tc.ttl, tc.cap.Year(), err, tc.ok)
		}
	}
}
