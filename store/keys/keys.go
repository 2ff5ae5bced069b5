// Package keys holds the rules every list store shares: how feature keys and
// item keys are spelled, which identifiers are valid, and how long an item
// lives. It is pure (no I/O, no clock of its own) so that every backend gives
// the same answer, and so that it can be fuzzed. Nothing else may build a
// key or compute a TTL.
package keys

import (
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"strconv"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/listgate/listgate/errkind"
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w %s", errkind.Invalid, fmt.Sprintf(format, args...))
}

const (
	// TimestampDigits is the width of the zero-padded nanosecond timestamp
	// that starts an item key; 19 digits hold every non-negative int64.
	TimestampDigits = 19
	// HashLen is the length of base64(md5(value)) with padding.
	HashLen = 24
	// ItemKeyLen is the length of every item key.
	ItemKeyLen = TimestampDigits + 1 + HashLen

	// MaxItemKey sorts after every item key (they all start with a digit);
	// it is the upper bound of a read that has no cursor.
	MaxItemKey = ":"

	MaxNameLen     = 64
	MaxVersionLen  = 64
	MaxEntityIDLen = 256
)

// FeatureKey spells the key of a list feature: "$entityType#$name|$version".
// The parts must have been validated.
func FeatureKey(entityType, name, version string) string {
	return entityType + "#" + name + "|" + version
}

// ValueHash is the standard, padded base64 of the MD5 of a value's bytes: the
// part of an item key that tells values apart.
func ValueHash(value []byte) string {
	var b [HashLen]byte
	appendHash(b[:0], value)
	return string(b[:])
}

// AppendValueHash appends ValueHash(value) to dst.
func AppendValueHash(dst, value []byte) []byte { return appendHash(dst, value) }

func appendHash(dst, value []byte) []byte {
	sum := md5.Sum(value)
	return base64.StdEncoding.AppendEncode(dst, sum[:])
}

// TimestampPrefix is the 19-digit, zero-padded spelling of a nanosecond
// timestamp: item keys at or after ts sort at or after it.
func TimestampPrefix(ts int64) string {
	var b [TimestampDigits]byte
	return string(appendTimestamp(b[:0], ts))
}

func appendTimestamp(dst []byte, ts int64) []byte {
	var digits [TimestampDigits]byte
	for i := range digits {
		digits[i] = '0'
	}
	var tmp [20]byte
	s := strconv.AppendInt(tmp[:0], ts, 10)
	copy(digits[TimestampDigits-len(s):], s)
	return append(dst, digits[:]...)
}

// ItemKey is the clustering key of an item: the 19-digit timestamp, '#', and
// the value's hash. Equal (timestamp, value) pairs give equal keys; keys sort
// like their timestamps. ts must be non-negative (see ValidateTimestamp).
func ItemKey(ts int64, value []byte) string {
	var b [ItemKeyLen]byte
	return string(AppendItemKey(b[:0], ts, value))
}

// AppendItemKey appends ItemKey(ts, value) to dst.
func AppendItemKey(dst []byte, ts int64, value []byte) []byte {
	dst = appendTimestamp(dst, ts)
	dst = append(dst, '#')
	return appendHash(dst, value)
}

// ParseItemKey checks that key is a well-formed item key (as a cursor must
// be) and returns its timestamp.
func ParseItemKey(key string) (int64, error) {
	if len(key) != ItemKeyLen || key[TimestampDigits] != '#' {
		return 0, invalid("cursor %s: not an item key (19-digit timestamp, '#', base64 MD5)", errkind.Quote(key))
	}
	ts, err := strconv.ParseInt(key[:TimestampDigits], 10, 64)
	if err != nil || ts < 0 || key[0] == '+' || key[0] == '-' {
		return 0, invalid("cursor %s: timestamp part is not 19 digits", errkind.Quote(key))
	}
	var sum [md5.Size + 2]byte
	if n, err := base64.StdEncoding.Decode(sum[:], []byte(key[TimestampDigits+1:])); err != nil || n != md5.Size {
		return 0, invalid("cursor %s: hash part is not a base64 MD5", errkind.Quote(key))
	}
	return ts, nil
}

// ItemTimestamp reads the timestamp of an item key written by ItemKey.
func ItemTimestamp(key string) int64 {
	var ts int64
	for i := 0; i < TimestampDigits && i < len(key); i++ {
		ts = ts*10 + int64(key[i]-'0')
	}
	return ts
}

// ValidateName checks an entity type or feature name: [a-z][a-z0-9_]{0,63}.
func ValidateName(what, s string) error {
	if s == "" {
		return invalid("%s: must not be empty", what)
	}
	if len(s) > MaxNameLen {
		return invalid("%s %s: longer than %d characters", what, errkind.Quote(s), MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '_') {
			continue
		}
		return invalid("%s %s: must match [a-z][a-z0-9_]{0,63} (lower-case letter first, then lower-case letters, digits or '_')", what, errkind.Quote(s))
	}
	return nil
}

// ValidateVersion checks a feature version: empty (the default version) or
// up to 64 printable ASCII characters other than space, '#' and '|'.
func ValidateVersion(s string) error {
	if len(s) > MaxVersionLen {
		return invalid("version %s: longer than %d characters", errkind.Quote(s), MaxVersionLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c > '~' || c == '#' || c == '|' {
			return invalid("version %s: only printable ASCII other than space, '#' and '|' is allowed", errkind.Quote(s))
		}
	}
	return nil
}

// ValidateEntityID checks an entity id: 1 to 256 bytes of UTF-8 without
// control characters.
func ValidateEntityID(s string) error {
	if s == "" {
		return invalid("entity id: must not be empty")
	}
	if len(s) > MaxEntityIDLen {
		return invalid("entity id %s: longer than %d bytes", errkind.Quote(s), MaxEntityIDLen)
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < ' ' || c == 0x7f {
				return invalid("entity id %s: control characters are not allowed", errkind.Quote(s))
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return invalid("entity id %s: not valid UTF-8", errkind.Quote(s))
		}
		if unicode.IsControl(r) {
			return invalid("entity id %s: control characters are not allowed", errkind.Quote(s))
		}
		i += n
	}
	return nil
}

// ValidateFeature checks the three parts of a feature key.
func ValidateFeature(entityType, name, version string) error {
	if err := ValidateName("entity type", entityType); err != nil {
		return err
	}
	if err := ValidateName("feature name", name); err != nil {
		return err
	}
	return ValidateVersion(version)
}

// ValidateList checks a feature key's parts and an entity id.
func ValidateList(entityType, name, version, entityID string) error {
	if err := ValidateFeature(entityType, name, version); err != nil {
		return err
	}
	return ValidateEntityID(entityID)
}

// TTL limits shared by Cassandra and ScyllaDB.
const (
	// MaxTTL is the largest TTL a CQL server accepts (20 years).
	MaxTTL = 630_720_000 * time.Second
	// MaxFuture bounds how far past now an item's timestamp may be.
	MaxFuture = time.Hour
)

// Expiry-date caps of CQL servers. Cassandra 4.x, and 5.0 in its shipped
// storage_compatibility_mode CASSANDRA_4, reject expiry dates past
// 2038-01-19T03:14:06Z; Cassandra 5.0 in mode NONE accepts them up to 2106.
var (
	ExpiryCap2038 = time.Unix(1<<31-2, 0).UTC()
	ExpiryCap2106 = time.Unix(1<<32-2, 0).UTC()
)

// ValidateFeatureTTL checks a feature's TTL: whole seconds, 1 s to 20 years,
// and, written now, an expiry date the server can store.
func ValidateFeatureTTL(ttl time.Duration, now, expiryCap time.Time) error {
	if ttl < time.Second || ttl > MaxTTL || ttl%time.Second != 0 {
		return invalid("ttlSeconds %d: must be whole seconds from 1 to %d (20 years)", int64(ttl/time.Second), int64(MaxTTL/time.Second))
	}
	if now.Add(ttl).After(expiryCap) {
		return invalid("ttlSeconds %d: items written now would expire after %s, the latest expiry date this server can store", int64(ttl/time.Second), expiryCap.Format(time.RFC3339))
	}
	return nil
}

// ValidateTimestamp checks an item timestamp (ns since the Unix epoch): not
// negative and at most MaxFuture after now.
func ValidateTimestamp(ts int64, now time.Time) error {
	if ts < 0 {
		return invalid("timestamp %s: before 1970-01-01, item keys cannot hold it", time.Unix(0, ts).UTC().Format(time.RFC3339Nano))
	}
	if limit := now.Add(MaxFuture).UnixNano(); ts > limit {
		return invalid("timestamp %s: more than %s in the future", time.Unix(0, ts).UTC().Format(time.RFC3339Nano), MaxFuture)
	}
	return nil
}

// ItemTTL is the CQL TTL, in whole seconds, of an item stamped ts under a
// feature that keeps items for ttl, written at now: ts + ttl − now, rounded
// up, so an item outlives its expiry by less than a second and an item with
// any time left is never sent TTL 0 (which means "never expire"). live is
// false when the item has already expired and must not be written. It is an
// error when the TTL exceeds MaxTTL or the expiry passes expiryCap.
func ItemTTL(ts int64, ttl time.Duration, now, expiryCap time.Time) (seconds int32, live bool, err error) {
	if err := ValidateTimestamp(ts, now); err != nil {
		return 0, false, err
	}
	// ts ≤ now+MaxFuture and ttl ≤ MaxTTL, so the sum cannot overflow before 2262.
	left := ts + int64(ttl) - now.UnixNano()
	if left <= 0 {
		return 0, false, nil
	}
	secs := (left + int64(time.Second) - 1) / int64(time.Second)
	if secs > int64(MaxTTL/time.Second) {
		return 0, false, invalid("timestamp %s: the item would live %d s, more than the server's maximum TTL of %d s", time.Unix(0, ts).UTC().Format(time.RFC3339Nano), secs, int64(MaxTTL/time.Second))
	}
	if expiry := now.Unix() + secs; expiry > expiryCap.Unix() {
		return 0, false, invalid("timestamp %s: the item would expire after %s, the latest expiry date this server can store", time.Unix(0, ts).UTC().Format(time.RFC3339Nano), expiryCap.Format(time.RFC3339))
	}
	return int32(secs), true, nil
}

// HashOf is the value hash an item key carries.
func HashOf(key string) string {
	if len(key) != ItemKeyLen {
		return ""
	}
	return key[TimestampDigits+1:]
}
