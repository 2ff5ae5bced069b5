package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// tenant sends requests with one API key.
type tenant struct {
	t      *testing.T
	base   string
	token  string
	client *http.Client
}

// answer is one answer a tenant got.
type answer struct {
	status  int
	header  http.Header
	body    []byte
	took    time.Duration
	errCode string // the first error's code
}

func (tn tenant) send(query string) answer {
	body, _ := json.Marshal(map[string]any{"query": query})
	req, err := http.NewRequest(http.MethodPost, tn.base+"/graphql", bytes.NewReader(body))
	if err != nil {
		tn.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tn.token)
	start := time.Now()
	resp, err := tn.client.Do(req)
	if err != nil {
		return answer{errCode: err.Error(), took: time.Since(start)}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, body: b, took: time.Since(start)}
	var out struct {
		Errors []struct{ Extensions struct{ Code string } }
	}
	if json.Unmarshal(b, &out) == nil && len(out.Errors) > 0 {
		a.errCode = out.Errors[0].Extensions.Code
	}
	return a
}

// p99 is the 99th percentile of d.
func p99(d []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(d))
	return s[min(len(s)-1, len(s)*99/100)]
}

// Two API keys on one gateway in production mode, A's with a budget of its
// own (cost=200000/400000 in the keys file): while key A runs 32 heavy
// reads at once (33 lists of 1,000 items each, complexity about 99,000)
// for 10 s, key B's small reads (one list of 10 items, and 10
// lists of 10) all succeed, none refused; A is throttled (429, THROTTLED,
// Retry-After, the RateLimit headers; its client waits as Retry-After
// says), is served no more than its budget pays for, and its budget
// refills once it stops. B's latencies, alone and beside A, are logged:
// they are figures of the machine, which a test does not bound.
func TestOneCallerCannotStarveAnother(t *testing.T) {
	keys := map[string]string{"a": "tenant-a-key", "b": "tenant-b-key"}
	// A's key names its own budget: two heavy reads a second. B has the
	// gateway's.
	budgets := map[string]string{"a": " cost=200000/400000", "b": ""}
	var lines []string
	for name, key := range keys {
		sum := sha256.Sum256([]byte(key))
		lines = append(lines, name+" "+hex.EncodeToString(sum[:])+" lists:read,lists:write,features:admin"+budgets[name])
	}
	g := startGateway(t, "LISTGATE_MODE=prod", "LISTGATE_API_KEYS="+strings.Join(lines, ";"))
	a := tenant{t, g.base, keys["a"], &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}}
	b := tenant{t, g.base, keys["b"], &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}, Timeout: 30 * time.Second}}
	requestAs(t, g.base, keys["a"], `mutation { createListFeature(input: {entityType: "user", name: "f", valueType: STRING, ttlSeconds: 3600}) { key } }`, nil)
	var ids []string
	for l := range 33 {
		ids = append(ids, fmt.Sprintf("%q", fmt.Sprint("big", l)))
		items := make([]map[string]any, 1000)
		for i := range items {
			items[i] = map[string]any{"value": fmt.Sprint("story", i)}
		}
		requestAs(t, g.base, keys["a"], `mutation($items: [ListItemInput!]!, $e: ID!) { addListItems(list: {entityType: "user", entityId: $e, feature: "f"}, items: $items) { added } }`,
			map[string]any{"items": items, "e": fmt.Sprint("big", l)})
	}
	for l := range 10 {
		items := make([]map[string]any, 10)
		for i := range items {
			items[i] = map[string]any{"value": fmt.Sprint("story", i)}
		}
		requestAs(t, g.base, keys["b"], `mutation($items: [ListItemInput!]!, $e: ID!) { addListItems(list: {entityType: "user", entityId: $e, feature: "f"}, items: $items) { added } }`,
			map[string]any{"items": items, "e": fmt.Sprint("small", l)})
	}
	heavy := fmt.Sprintf(`{ entities(type: "user", entityIds: [%s]) { list(feature: "f", limit: 1000) { items { value } } } }`, strings.Join(ids, ", "))
	oneList := `{ listItems(entityType: "user", entityId: "small0", feature: "f", limit: 10) { items { value } } }`
	tenLists := `{ entities(type: "user", entityIds: ["small0", "small1", "small2", "small3", "small4", "small5", "small6", "small7", "small8", "small9"]) { list(feature: "f", limit: 10) { items { value } } } }`

	// B's reads, one after another, for d.
	measureB := func(d time.Duration) (one, ten []time.Duration) {
		for end := time.Now().Add(d); time.Now().Before(end); {
			for _, q := range []string{oneList, tenLists} {
				r := b.send(q)
				if r.status != 200 || r.errCode != "" {
					t.Fatalf("B: %d %s %.300s", r.status, r.errCode, r.body)
				}
				if q == oneList {
					one = append(one, r.took)
				} else {
					ten = append(ten, r.took)
				}
			}
		}
		return one, ten
	}
	b.send(oneList) // connections open, documents parsed
	b.send(tenLists)
	aloneOne, aloneTen := measureB(3 * time.Second)

	var served, throttled atomic.Int64
	var sample atomic.Pointer[answer]
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				switch r := a.send(heavy); {
				case r.status == 200 && r.errCode == "":
					served.Add(1)
				case r.status == http.StatusTooManyRequests && r.errCode == "THROTTLED":
					throttled.Add(1)
					sample.CompareAndSwap(nil, &r)
					// A client waits as Retry-After says (the loop ends with
					// the run).
					wait, _ := strconv.Atoi(r.header.Get("Retry-After"))
					select {
					case <-stop:
					case <-time.After(time.Duration(wait) * time.Second):
					}
				default:
					t.Errorf("A: %d %s %.300s", r.status, r.errCode, r.body)
					return
				}
			}
		})
	}
	began := time.Now()
	busyOne, busyTen := measureB(10 * time.Second)
	close(stop)
	wg.Wait()
	ran := time.Since(began)

	t.Logf("B alone: one list p99 %v (%d), ten lists p99 %v (%d)", p99(aloneOne), len(aloneOne), p99(aloneTen), len(aloneTen))
	t.Logf("B while A runs 32 heavy reads at once: one list p99 %v (%d), ten lists p99 %v (%d)", p99(busyOne), len(busyOne), p99(busyTen), len(busyTen))
	t.Logf("A: %d heavy reads served (%.1f a second), %d throttled", served.Load(), float64(served.Load())/10, throttled.Load())
	// Each heavy read costs at least 33,000 points (33 lists of 1,000
	// items): A's bucket of 400,000, refilled at 200,000 a second, pays for
	// no more than this many (without a budget A was served 56 a second).
	if most := (400_000 + 200_000*ran.Seconds()) / 33_000; float64(served.Load()) > most {
		t.Errorf("A was served %d heavy reads in %v; its budget pays for %.0f at most", served.Load(), ran, most)
	}
	r := sample.Load()
	if r == nil {
		t.Fatal("A was never throttled")
	}
	if r.header.Get("Retry-After") == "" || !strings.HasPrefix(r.header.Get("RateLimit"), `"cost";r=`) || !strings.HasPrefix(r.header.Get("RateLimit-Policy"), `"cost";q=`) {
		t.Errorf("A's 429 lacks its headers: %v", r.header)
	}
	// Once A stops, its budget refills: an answer soon says so.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := a.send(oneList)
		if r.status == 200 && r.errCode == "" && r.header.Get("RateLimit") != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A's budget did not refill: %d %s %v", r.status, r.errCode, r.header)
		}
		time.Sleep(100 * time.Millisecond) // polling the budget with a deadline
	}
}
