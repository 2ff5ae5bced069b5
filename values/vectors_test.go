package values

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
)

// itemVectors is testdata/item_vectors.json: the golden vectors an
// external writer (docs/data-model.md) checks its own encoding against.
type itemVectors struct {
	Vectors []struct {
		Name           string
		ValueType      store.ValueType
		Value          json.RawMessage
		Timestamp      string
		TimestampNanos string
		StoredHex      string
		StoredBase64   string
		ItemKey        string
	}
	Refused []struct {
		ValueType store.ValueType
		Value     json.RawMessage
		Why       string
	}
	TTL []struct {
		Now, Timestamp string
		TTLSeconds     int64
		CQLTTL         int32
		Expired        bool
	}
}

func readVectors(t *testing.T) itemVectors {
	t.Helper()
	raw, err := os.ReadFile("testdata/item_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v itemVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Vectors) == 0 || len(v.Refused) == 0 || len(v.TTL) == 0 {
		t.Fatal("testdata/item_vectors.json holds no vectors")
	}
	return v
}

// decodeInput decodes a ListValue as the gateway decodes a request's JSON:
// numbers kept as json.Number.
func decodeInput(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("value %s: %v", raw, err)
	}
	return v
}

func TestGoldenVectors(t *testing.T) {
	v := readVectors(t)
	for _, tc := range v.Vectors {
		t.Run(tc.Name, func(t *testing.T) {
			stored, err := Encode(tc.ValueType, decodeInput(t, tc.Value))
			if err != nil {
				t.Fatalf("Encode(%s, %s): %v", tc.ValueType, tc.Value, err)
			}
			if got := hex.EncodeToString(stored); got != tc.StoredHex {
				t.Fatalf("stored %s (%q), want %s", got, stored, tc.StoredHex)
			}
			if got := base64.StdEncoding.EncodeToString(stored); got != tc.StoredBase64 {
				t.Fatalf("stored base64 %s, want %s", got, tc.StoredBase64)
			}
			ts, err := time.Parse(time.RFC3339Nano, tc.Timestamp)
			if err != nil {
				t.Fatal(err)
			}
			if got := strconv.FormatInt(ts.UnixNano(), 10); got != tc.TimestampNanos {
				t.Fatalf("timestamp %s is %s ns, want %s", tc.Timestamp, got, tc.TimestampNanos)
			}
			if got := keys.ItemKey(ts.UnixNano(), stored); got != tc.ItemKey {
				t.Fatalf("item key %s, want %s", got, tc.ItemKey)
			}
			// What is stored reads back as valid JSON of its type.
			if err := Check(tc.ValueType, stored); err != nil {
				t.Fatal(err)
			}
			if out := AppendJSON(nil, tc.ValueType, stored); !json.Valid(out) {
				t.Fatalf("reads back as %q, not JSON", out)
			}
		})
	}
	for _, tc := range v.Refused {
		if _, err := Encode(tc.ValueType, decodeInput(t, tc.Value)); err == nil {
			t.Errorf("%s %s (%s) was accepted; want it refused", tc.ValueType, tc.Value, tc.Why)
		}
	}
	for _, tc := range v.TTL {
		now, err1 := time.Parse(time.RFC3339Nano, tc.Now)
		ts, err2 := time.Parse(time.RFC3339Nano, tc.Timestamp)
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		secs, live, err := keys.ItemTTL(ts.UnixNano(), time.Duration(tc.TTLSeconds)*time.Second, now, keys.ExpiryCap2106)
		if err != nil || secs != tc.CQLTTL || live == tc.Expired {
			t.Errorf("TTL of %s written at %s under %d s = %d, live %v, %v; want %d, expired %v", tc.Timestamp, tc.Now, tc.TTLSeconds, secs, live, err, tc.CQLTTL, tc.Expired)
		}
	}
}
