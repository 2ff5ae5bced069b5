// Command restpeer is the REST peer the benchmark compares the gateway
// with: the service a team would otherwise hand-write, on net/http, gocql
// and encoding/json, with two routes:
//
//	GET  /lists/{entityType}/{entityId}/{feature}?version=&limit=&after=
//	POST /lists/{entityType}/{entityId}/{feature}?version=  {"items": [{"value": …, "timestamp": …}]}
//
// The first answers the fields the gateway answers for
// listItems { items { value timestamp cursor } hasMore endCursor }, read
// with the CQL store's statement over a session set up as the store's. The
// second adds items as addListItems does: one logged batch of INSERTs into
// the list's partition, each with its item's TTL, answering {"added": n}.
// Like a first hand-written service it knows only a feature's value type
// and TTL (read once at start-up), not caps, features created again or
// live lists; the benchmark's features have none. It is bench-only: bench/ builds it,
// starts it on a free port and measures its process; listgate never
// serves it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
	"github.com/listgate/listgate/store/keys"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("restpeer", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8081", "address to serve on")
	hosts := fs.String("cql-hosts", "127.0.0.1:9042", "CQL contact points, comma separated")
	keyspace := fs.String("cql-keyspace", "listgate", "keyspace of the list tables")
	if err := fs.Parse(args); err != nil {
		return err
	}
	session, err := openSession(strings.Split(*hosts, ","))
	if err != nil {
		return err
	}
	defer session.Close()
	types, err := readFeatures(ctx, session, *keyspace)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: newServer(session, *keyspace, types), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "restpeer serving http://%s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// openSession connects as the gateway's CQL store does with its default
// settings (store/cql Open and DefaultConfig): LOCAL_QUORUM, token-aware
// round robin, its timeouts, connections per host and retries.
func openSession(hosts []string) (*gocql.Session, error) {
	def := cql.DefaultConfig()
	cluster := gocql.NewCluster(hosts...)
	cluster.Timeout = def.Timeout
	cluster.ConnectTimeout = def.ConnectTimeout
	cluster.NumConns = def.NumConns
	cluster.Consistency = def.ReadConsistency
	cluster.RetryPolicy = &gocql.ExponentialBackoffRetryPolicy{NumRetries: def.Retries, Min: 10 * time.Millisecond, Max: 200 * time.Millisecond}
	cluster.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	return cluster.CreateSession()
}

// feature is what the peer knows of a feature.
type feature struct {
	valueType store.ValueType
	ttl       time.Duration
}

// readFeatures reads the value type and TTL of every feature not deleted,
// by feature key.
func readFeatures(ctx context.Context, session *gocql.Session, keyspace string) (map[string]feature, error) {
	iter := session.Query("SELECT entity_type, name, version, value_type, ttl_seconds, deleted_at FROM " + keyspace + ".list_features").WithContext(ctx).Iter()
	types := map[string]feature{}
	var entityType, name, version, valueType string
	var ttl int
	var deletedAt time.Time
	for iter.Scan(&entityType, &name, &version, &valueType, &ttl, &deletedAt) {
		if deletedAt.IsZero() {
			types[keys.FeatureKey(entityType, name, version)] = feature{store.ValueType(valueType), time.Duration(ttl) * time.Second}
		}
	}
	if err := iter.Close(); err != nil {
		return nil, fmt.Errorf("reading the features: %w", err)
	}
	return types, nil
}

func newServer(session *gocql.Session, keyspace string, types map[string]feature) http.Handler {
	l := &lists{
		session: session,
		types:   types,
		read:    "SELECT item_key, value FROM " + keyspace + ".list_items WHERE feature_key = ? AND entity_id = ? AND item_key >= ? AND item_key < ? LIMIT ?",
		insert:  "INSERT INTO " + keyspace + ".list_items (feature_key, entity_id, item_key, value) VALUES (?, ?, ?, ?) USING TTL ?",
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /lists/{entityType}/{entityId}/{feature}", l.items)
	mux.HandleFunc("POST /lists/{entityType}/{entityId}/{feature}", l.add)
	return mux
}

type lists struct {
	session      *gocql.Session
	types        map[string]feature
	read, insert string
}

type item struct {
	Value     any       `json:"value"`
	Timestamp time.Time `json:"timestamp"`
	Cursor    string    `json:"cursor"`
}

type page struct {
	Items     []item  `json:"items"`
	HasMore   bool    `json:"hasMore"`
	EndCursor *string `json:"endCursor"`
}

// items answers a page of a list, newest first: limit items (100 unless
// given) older than the cursor after.
func (l *lists) items(w http.ResponseWriter, r *http.Request) {
	entityType, entityID, feature, q := r.PathValue("entityType"), r.PathValue("entityId"), r.PathValue("feature"), r.URL.Query()
	if err := keys.ValidateList(entityType, feature, q.Get("version"), entityID); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	featureKey := keys.FeatureKey(entityType, feature, q.Get("version"))
	f, ok := l.types[featureKey]
	valueType := f.valueType
	if !ok {
		http.Error(w, "no feature "+featureKey, http.StatusNotFound)
		return
	}
	limit := 100
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > store.MaxLimit {
			http.Error(w, fmt.Sprintf("limit: a number from 1 to %d", store.MaxLimit), http.StatusBadRequest)
			return
		}
		limit = n
	}
	before := keys.MaxItemKey
	if after := q.Get("after"); after != "" {
		if _, err := keys.ParseItemKey(after); err != nil {
			http.Error(w, "after: not a cursor", http.StatusBadRequest)
			return
		}
		before = after
	}
	// One row more than the page tells whether more follow.
	iter := l.session.Query(l.read, featureKey, entityID, "", before, limit+1).
		WithContext(r.Context()).Idempotent(true).PageSize(limit + 1).Iter()
	p := page{Items: make([]item, 0, limit)}
	scanner := iter.Scanner()
	for scanner.Next() {
		if len(p.Items) == limit {
			p.HasMore = true
			break
		}
		var key string
		var value []byte
		if err := scanner.Scan(&key, &value); err != nil {
			iter.Close()
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		p.Items = append(p.Items, item{Value: jsonValue(valueType, value), Timestamp: time.Unix(0, keys.ItemTimestamp(key)).UTC(), Cursor: key})
	}
	if err := scanner.Err(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if n := len(p.Items); n > 0 {
		p.EndCursor = &p.Items[n-1].Cursor
	}
	body, err := json.Marshal(p)
	if err != nil {
		http.Error(w, fmt.Sprintf("a stored value is not a valid %s value: %v", valueType, err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// maxAdd bounds the items of one add, as --max-add-items does.
const maxAdd = 1000

// add writes items to a list: one logged batch into its partition, each
// item with its TTL; a value is stored as the gateway stores it (STRING
// features only: the benchmark's).
func (l *lists) add(w http.ResponseWriter, r *http.Request) {
	entityType, entityID, name, version := r.PathValue("entityType"), r.PathValue("entityId"), r.PathValue("feature"), r.URL.Query().Get("version")
	if err := keys.ValidateList(entityType, name, version, entityID); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	featureKey := keys.FeatureKey(entityType, name, version)
	f, ok := l.types[featureKey]
	if !ok || f.valueType != store.String {
		http.Error(w, "no STRING feature "+featureKey, http.StatusNotFound)
		return
	}
	var in struct {
		Items []struct {
			Value     string     `json:"value"`
			Timestamp *time.Time `json:"timestamp"`
		} `json:"items"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&in); err != nil || len(in.Items) == 0 || len(in.Items) > maxAdd {
		http.Error(w, fmt.Sprintf("a body of 1 to %d items", maxAdd), http.StatusBadRequest)
		return
	}
	now := time.Now()
	b := l.session.Batch(gocql.LoggedBatch).WithContext(r.Context())
	for _, it := range in.Items {
		ts := now.UnixNano()
		if it.Timestamp != nil {
			ts = it.Timestamp.UnixNano()
		}
		ttl, alive, err := keys.ItemTTL(ts, f.ttl, now, keys.ExpiryCap2038)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if alive {
			value := []byte(it.Value)
			b.Query(l.insert, featureKey, entityID, keys.ItemKey(ts, value), value, ttl)
		}
	}
	if b.Size() > 0 {
		if err := l.session.ExecuteBatch(b); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"added":%d}`, b.Size())
}

// jsonValue is a stored value as the gateway writes it: STRING as a
// string, BYTES as base64 (encoding/json's way with []byte), an INT beyond
// what a JavaScript number holds exactly as a string of its digits, and
// the others as the JSON text they are stored as (which encoding/json
// checks as it writes it).
func jsonValue(t store.ValueType, b []byte) any {
	switch t {
	case store.String:
		return string(b)
	case store.Bytes:
		return b
	case store.Int:
		const maxSafe = 1<<53 - 1
		if n, err := strconv.ParseInt(string(b), 10, 64); err == nil && (n > maxSafe || n < -maxSafe) {
			return string(b)
		}
	}
	return json.RawMessage(b)
}
