package load

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/graph/model"
	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/keys"
	"github.com/listgate/listgate/values"
)

// GatewayTarget writes through a gateway's GraphQL endpoint, with
// addListItemsBatch: every guard of the gateway applies. A request that
// comes back throttled or unavailable is sent again after its Retry-After;
// of one that comes back with some lists failed, only those lists are.
type GatewayTarget struct {
	URL    string // the GraphQL endpoint, e.g. http://127.0.0.1:8080/graphql
	APIKey string // sent as Authorization: Bearer; "": none
	Client *http.Client
	// Limit is how requests are packed: at most the gateway's
	// --max-add-items items, --max-batch-lists lists and --max-body-bytes
	// bytes.
	Limit Limits
	// Retries is how many times a list whose add failed for a reason that
	// may pass is sent again.
	Retries int

	mu       sync.Mutex // guards features and fetched
	features map[string]*store.Feature
	fetched  map[string]time.Time // entity type → when its features were last read
}

// maxAnswerBytes bounds an answer read: a batch's answer is small.
const maxAnswerBytes = 4 << 20

func (t *GatewayTarget) Limits() Limits { return t.Limit }

// ExpiryCap is the latest a Cassandra or ScyllaDB can keep; the gateway
// checks its own.
func (t *GatewayTarget) ExpiryCap() time.Time { return time.Now().Add(keys.MaxTTL) }

func (t *GatewayTarget) Close() error { return nil }

// Feature reads the features of an entity type through the gateway, again
// on a miss at most once a second.
func (t *GatewayTarget) Feature(ctx context.Context, entityType, name, version string) (*store.Feature, error) {
	key := keys.FeatureKey(entityType, name, version)
	t.mu.Lock()
	f, ok := t.features[key]
	stale := time.Since(t.fetched[entityType]) > time.Second
	t.mu.Unlock()
	if ok {
		return f, nil
	}
	if stale {
		if err := t.fetch(ctx, entityType); err != nil {
			return nil, err
		}
		t.mu.Lock()
		f, ok = t.features[key]
		t.mu.Unlock()
		if ok {
			return f, nil
		}
	}
	return nil, fmt.Errorf("feature %s: %w: the gateway has no such feature (listFeatures(entityType: %q) names those it has)", key, errkind.NotFound, entityType)
}

func (t *GatewayTarget) fetch(ctx context.Context, entityType string) error {
	body, _ := json.Marshal(map[string]any{
		"query":     `query($t: String) { listFeatures(entityType: $t) { entityType name version valueType ttlSeconds } }`,
		"variables": map[string]any{"t": entityType},
	})
	var out struct {
		Data struct {
			ListFeatures []struct {
				EntityType, Name, Version string
				ValueType                 store.ValueType
				TTLSeconds                int64
			}
		}
	}
	status, header, answer, err := t.post(ctx, body)
	if err != nil {
		return err
	}
	if err := answerError(status, header, answer); err != nil {
		return fmt.Errorf("reading the features of %s from the gateway: %w", entityType, err)
	}
	if err := json.Unmarshal(answer, &out); err != nil {
		return fmt.Errorf("reading the features of %s from the gateway: %w", entityType, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.features == nil {
		t.features, t.fetched = map[string]*store.Feature{}, map[string]time.Time{}
	}
	for _, f := range out.Data.ListFeatures {
		sf := &store.Feature{EntityType: f.EntityType, Name: f.Name, Version: f.Version, ValueType: f.ValueType, TTL: time.Duration(f.TTLSeconds) * time.Second}
		t.features[sf.Key()] = sf
	}
	t.fetched[entityType] = time.Now()
	return nil
}

// Write sends the batch as one addListItemsBatch, then again the lists that
// failed for a reason that may pass. A request the gateway refuses whole
// for its input is split, to find the lists at fault.
func (t *GatewayTarget) Write(ctx context.Context, b Batch) ([]Refused, error) {
	idx := make([]int, len(b))
	for i := range idx {
		idx[i] = i
	}
	return t.write(ctx, b, idx)
}

func (t *GatewayTarget) write(ctx context.Context, b Batch, idx []int) ([]Refused, error) {
	var refused []Refused
	wait := 100 * time.Millisecond
	for try := 0; len(idx) > 0; try++ {
		body := requestBody(b, idx)
		status, header, answer, err := t.post(ctx, body)
		if err != nil {
			if ctx.Err() != nil || try >= t.Retries {
				return refused, err
			}
			if err := sleep(ctx, wait); err != nil {
				return refused, err
			}
			wait = min(2*wait, 5*time.Second)
			continue
		}
		switch status {
		case http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusBadGateway, http.StatusGatewayTimeout:
			if try >= t.Retries {
				return refused, fmt.Errorf("the gateway: %w", answerError(status, header, answer))
			}
			if err := sleep(ctx, retryAfter(header, wait)); err != nil {
				return refused, err
			}
			wait = min(2*wait, 5*time.Second)
			continue
		case http.StatusRequestEntityTooLarge:
			if len(idx) == 1 {
				return refused, fmt.Errorf("the gateway refuses a request of one list's add as too large (%d bytes): lower --batch-bytes", len(body))
			}
			return t.split(ctx, b, idx, refused)
		}
		var out struct {
			Data *struct {
				AddListItemsBatch []*struct{ Added, Expired int } `json:"addListItemsBatch"`
			} `json:"data"`
			Errors []answerErr `json:"errors"`
		}
		if err := json.Unmarshal(answer, &out); err != nil {
			return refused, fmt.Errorf("the gateway answered %d with what is not GraphQL: %s", status, errkind.Clip(string(answer)))
		}
		if out.Data == nil || out.Data.AddListItemsBatch == nil {
			e := firstError(out.Errors)
			switch {
			case e.code() == "BAD_USER_INPUT" && len(idx) > 1:
				return t.split(ctx, b, idx, refused)
			case e.code() == "BAD_USER_INPUT":
				return append(refused, Refused{Add: idx[0], Err: errors.New(e.Message)}), nil
			case retryable(e.code()) && try < t.Retries:
				if err := sleep(ctx, retryAfter(header, wait)); err != nil {
					return refused, err
				}
				wait = min(2*wait, 5*time.Second)
				continue
			}
			return refused, fmt.Errorf("the gateway (HTTP %d): %s: %s", status, e.code(), e.Message)
		}
		results := out.Data.AddListItemsBatch
		if len(results) != len(idx) {
			return refused, fmt.Errorf("the gateway answered %d results for %d lists", len(results), len(idx))
		}
		var again []int
		for k, r := range results {
			if r != nil {
				continue
			}
			e := errorAt(out.Errors, k)
			switch {
			case e.code() == "BAD_USER_INPUT":
				refused = append(refused, Refused{Add: idx[k], Err: errors.New(e.Message)})
			case retryable(e.code()) && try < t.Retries:
				again = append(again, idx[k])
			default:
				a := b[idx[k]]
				return refused, fmt.Errorf("the gateway, adding to %s/%s: %s: %s", a.List.Feature.Key(), a.List.EntityID, e.code(), e.Message)
			}
		}
		idx = again
		if len(idx) > 0 {
			if err := sleep(ctx, retryAfter(header, wait)); err != nil {
				return refused, err
			}
			wait = min(2*wait, 5*time.Second)
		}
	}
	return refused, nil
}

// split writes the lists of idx in two halves.
func (t *GatewayTarget) split(ctx context.Context, b Batch, idx []int, refused []Refused) ([]Refused, error) {
	half := len(idx) / 2
	for _, part := range [][]int{idx[:half], idx[half:]} {
		r, err := t.write(ctx, b, part)
		refused = append(refused, r...)
		if err != nil {
			return refused, err
		}
	}
	return refused, nil
}

func (t *GatewayTarget) post(ctx context.Context, body []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if t.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.APIKey)
	}
	resp, err := t.Client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	return resp.StatusCode, resp.Header, answer, err
}

// requestBody is the addListItemsBatch of the adds idx of b, each value
// written as the gateway writes it back.
func requestBody(b Batch, idx []int) []byte {
	buf := []byte(`{"query":"mutation($adds: [ListAddInput!]!) { addListItemsBatch(adds: $adds) { added expired } }","variables":{"adds":[`)
	for n, i := range idx {
		a := b[i]
		if n > 0 {
			buf = append(buf, ',')
		}
		f := a.List.Feature
		buf = append(buf, `{"list":{"entityType":`...)
		buf, _ = jsontext.AppendQuote(buf, f.EntityType)
		buf = append(buf, `,"entityId":`...)
		buf, _ = jsontext.AppendQuote(buf, a.List.EntityID)
		buf = append(buf, `,"feature":`...)
		buf, _ = jsontext.AppendQuote(buf, f.Name)
		buf = append(buf, `,"version":`...)
		buf, _ = jsontext.AppendQuote(buf, f.Version)
		buf = append(buf, `},"items":[`...)
		for k, it := range a.Items {
			if k > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, `{"value":`...)
			buf = values.AppendJSON(buf, f.ValueType, it.Value)
			buf = append(buf, `,"timestamp":`...)
			buf = model.Time(it.Timestamp).AppendJSON(buf)
			buf = append(buf, '}')
		}
		buf = append(buf, "]}"...)
	}
	return append(buf, "]}}"...)
}

type answerErr struct {
	Message    string `json:"message"`
	Path       []any  `json:"path"`
	Extensions struct {
		Code string `json:"code"`
	} `json:"extensions"`
}

func (e answerErr) code() string { return e.Extensions.Code }

func firstError(errs []answerErr) answerErr {
	if len(errs) == 0 {
		return answerErr{Message: "no data and no error"}
	}
	return errs[0]
}

// errorAt is the error of the k-th list of a batch's answer.
func errorAt(errs []answerErr, k int) answerErr {
	for _, e := range errs {
		if len(e.Path) >= 2 && e.Path[0] == "addListItemsBatch" {
			if n, ok := e.Path[1].(float64); ok && int(n) == k {
				return e
			}
		}
	}
	return firstError(errs)
}

// retryable says whether an error code may pass.
func retryable(code string) bool {
	switch code {
	case "UNAVAILABLE", "TIMEOUT", "THROTTLED":
		return true
	}
	return false
}

// answerError says what an answer that is not a success says.
func answerError(status int, header http.Header, answer []byte) error {
	var out struct {
		Errors []answerErr `json:"errors"`
	}
	json.Unmarshal(answer, &out)
	if status == http.StatusOK && len(out.Errors) == 0 {
		return nil
	}
	if len(out.Errors) > 0 {
		e := out.Errors[0]
		return fmt.Errorf("HTTP %d, %s: %s", status, e.code(), e.Message)
	}
	return fmt.Errorf("HTTP %d: %s", status, errkind.Clip(strings.TrimSpace(string(answer))))
}

// retryAfter is how long a Retry-After header says to wait (in seconds),
// or def.
func retryAfter(h http.Header, def time.Duration) time.Duration {
	if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil && s >= 0 {
		return min(time.Duration(s)*time.Second, time.Minute)
	}
	return def
}
