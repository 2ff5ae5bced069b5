package keys

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/listgate/listgate/errkind"
)

// Keys sort like their timestamps, whatever the values.
func FuzzItemKeyOrder(f *testing.F) {
	f.Add(int64(0), int64(1), []byte("a"), []byte("b"))
	f.Add(int64(1724949845430000000), int64(1724949845430000001), []byte{}, []byte{0xff})
	f.Add(int64(999999999), int64(1000000000), []byte("x"), []byte("x"))
	f.Fuzz(func(t *testing.T, a, b int64, va, vb []byte) {
		if a < 0 || b < 0 {
			return
		}
		ka, kb := ItemKey(a, va), ItemKey(b, vb)
		if a < b && ka >= kb || a > b && ka <= kb {
			t.Fatalf("ts %d vs %d but keys %q vs %q", a, b, ka, kb)
		}
		for _, k := range []string{ka, kb} {
			if len(k) != ItemKeyLen || k >= MaxItemKey {
				t.Fatalf("malformed key %q", k)
			}
		}
		if ts, err := ParseItemKey(ka); err != nil || ts != a {
			t.Fatalf("ParseItemKey(%q) = %d, %v", ka, ts, err)
		}
		if ka < TimestampPrefix(a) || (a < b && kb < TimestampPrefix(a)) {
			t.Fatalf("minTimestamp prefix %q does not bound %q", TimestampPrefix(a), ka)
		}
	})
}

// Equal values at equal timestamps give equal keys; distinct values give
// distinct keys.
func FuzzItemKeyIdentity(f *testing.F) {
	f.Add(int64(1724949845430000000), []byte("story1"), []byte("story2"))
	f.Add(int64(0), []byte(""), []byte("\x00"))
	f.Fuzz(func(t *testing.T, ts int64, va, vb []byte) {
		if ts < 0 {
			return
		}
		ka, ka2, kb := ItemKey(ts, va), ItemKey(ts, bytes.Clone(va)), ItemKey(ts, vb)
		if ka != ka2 {
			t.Fatalf("same value, different keys: %q %q", ka, ka2)
		}
		if bytes.Equal(va, vb) != (ka == kb) {
			t.Fatalf("values %q, %q; keys %q, %q", va, vb, ka, kb)
		}
		if HashOf(ka) != ValueHash(va) {
			t.Fatalf("key %q does not carry hash %q", ka, ValueHash(va))
		}
	})
}

// Validation never panics, and anything it accepts is safe to put in a key.
func FuzzValidate(f *testing.F) {
	for _, s := range []string{"user", "", "a#b", "a|b", "2025/03/11", "\x00", "é", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, err := range []error{ValidateName("name", s), ValidateVersion(s), ValidateEntityID(s)} {
			if err != nil && !errors.Is(err, errkind.Invalid) {
				t.Fatalf("error %v is not errkind.Invalid", err)
			}
		}
		if ValidateName("name", s) == nil && bytes.ContainsAny([]byte(s), "#|\x00 ") {
			t.Fatalf("name %q accepted", s)
		}
		if ValidateVersion(s) == nil && bytes.ContainsAny([]byte(s), "#|\x00") {
			t.Fatalf("version %q accepted", s)
		}
		if ValidateEntityID(s) == nil && (bytes.IndexByte([]byte(s), 0) >= 0 || len(s) == 0 || len(s) > MaxEntityIDLen) {
			t.Fatalf("entity id %q accepted", s)
		}
		_, _ = ParseItemKey(s)
	})
}

// The TTL is never 0 on the wire, never exceeds the maximum, and an item
// never outlives its expiry by a second or more.
func FuzzItemTTL(f *testing.F) {
	f.Add(int64(1724949845430000000), int64(86400), int64(1724949845430000000))
	f.Add(int64(0), int64(1), int64(0))
	f.Fuzz(func(t *testing.T, ts, ttlSecs, nowNS int64) {
		if nowNS < 0 || nowNS > ExpiryCap2106.UnixNano() || ttlSecs < 1 || ttlSecs > int64(MaxTTL/time.Second) {
			return
		}
		now := time.Unix(0, nowNS)
		ttl := time.Duration(ttlSecs) * time.Second
		secs, live, err := ItemTTL(ts, ttl, now, ExpiryCap2106)
		if err != nil {
			if !errors.Is(err, errkind.Invalid) {
				t.Fatalf("error %v is not errkind.Invalid", err)
			}
			return
		}
		if !live {
			if secs != 0 || ts+int64(ttl) > nowNS {
				t.Fatalf("not live but TTL %d, expiry %d after now %d", secs, ts+int64(ttl), nowNS)
			}
			return
		}
		expiry := ts + int64(ttl)
		stored := nowNS + int64(secs)*int64(time.Second)
		if secs <= 0 || time.Duration(secs)*time.Second > MaxTTL || stored < expiry || stored-expiry >= int64(time.Second) {
			t.Fatalf("ts %d ttl %v now %d: TTL %d s stores until %d, expiry %d", ts, ttl, nowNS, secs, stored, expiry)
		}
	})
}
