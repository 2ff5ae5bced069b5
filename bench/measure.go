package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
	"github.com/listgate/listgate/store/embedded"
	"github.com/listgate/listgate/store/keys"
)

// Lists of the workload: many short ones, fewer long ones.
type listClass struct {
	name     string
	size     int // items per list
	entities int
}

var classes = []listClass{{"10-item lists", 10, 1000}, {"1,000-item lists", 1000, 50}, {"10,000-item lists", 10000, 5}}

const (
	readLimit   = 100
	writeLists  = 1000 // entities that adds write to, drawn Zipf-like
	featureName = "reading_history"
	writeName   = "story_presented"
)

func entityID(class listClass, i int) string { return fmt.Sprintf("c%d-u%d", class.size, i) }

func value(i int) []byte { return fmt.Appendf(nil, "story%09d", i) }

// measure runs every scenario and gathers the report.
func measure(ctx context.Context, c config) (*report, error) {
	rep := &report{Machine: machine(), Date: time.Now().UTC().Format(time.RFC3339), Concurrency: c.concurrency,
		Duration: c.duration.String(), Runs: c.runs, Command: "make bench"}
	if c.quick {
		classes = []listClass{{"10-item lists", 10, 200}, {"1,000-item lists", 1000, 3}}
	}
	bin := c.gatewayBin
	if bin == "" {
		var err error
		if bin, err = build(); err != nil {
			return nil, fmt.Errorf("building the gateway: %w", err)
		}
	}
	keyspace := fmt.Sprintf("listgate_bench_%d", time.Now().Unix())
	hosts := strings.Split(c.cqlHosts, ",")
	log := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

	// The CQL store: seeded once, read by the gateway and by raw gocql.
	log("seeding keyspace %s on %s", keyspace, c.cqlHosts)
	cs, err := openCQL(ctx, hosts, keyspace, cql.RemoveByScan, true)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	feature, writeFeature, err := seed(ctx, cs)
	if err != nil {
		return nil, err
	}
	session, err := rawSession(hosts)
	if err != nil {
		return nil, err
	}
	defer session.Close()
	gw, err := startGateway(bin, c.concurrency, "--cql-hosts", c.cqlHosts, "--cql-keyspace", keyspace)
	if err != nil {
		return nil, err
	}
	defer gw.stop()

	raw := rawCQL{session: session, keyspace: keyspace, feature: feature, writeFeature: writeFeature}
	dbPid := cassandraPid(hosts)
	for _, class := range classes {
		if !c.does("reads") {
			break
		}
		log("reads of %s (CQL)", class.name)
		rep.add(compare(ctx, c, "Get List Items, "+class.name+", limit 100", "CQL", gw, dbPid,
			raw.read(class), gatewayRead(gw, class)))
	}
	for _, n := range []int{1, 10, 100} {
		if !c.does("adds") {
			break
		}
		log("adds of %d items (CQL)", n)
		rep.add(compare(ctx, c, fmt.Sprintf("Add List Items, %d per call", n), "CQL", gw, dbPid,
			raw.add(n), gatewayAdd(gw, n)))
	}
	for _, n := range []int{1, 10, 100} {
		if !c.does("fanout") {
			break
		}
		log("fan-out to %d entities", n)
		rep.FanOut = append(rep.FanOut, fanOut(ctx, c, gw, dbPid, n))
	}
	if c.does("removes") {
		log("remove by value")
		if rep.Removes, err = removes(ctx, c, hosts, keyspace); err != nil {
			return nil, err
		}
	}
	if !c.does("embedded") {
		return rep, nil
	}

	// The embedded store: one copy for the gateway, one for direct calls.
	log("seeding two embedded stores")
	dir, err := os.MkdirTemp("", "listgate-bench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	direct, err := embedded.Open(embedded.Config{Dir: filepath.Join(dir, "direct")})
	if err != nil {
		return nil, err
	}
	defer direct.Close()
	directFeature, directWrite, err := seed(ctx, direct)
	if err != nil {
		return nil, err
	}
	served, err := embedded.Open(embedded.Config{Dir: filepath.Join(dir, "served")})
	if err != nil {
		return nil, err
	}
	if _, _, err := seed(ctx, served); err != nil {
		return nil, err
	}
	served.Close()
	egw, err := startGateway(bin, c.concurrency, "--data-dir", filepath.Join(dir, "served"))
	if err != nil {
		return nil, err
	}
	defer egw.stop()
	emb := storeCalls{s: direct, feature: directFeature, writeFeature: directWrite}
	for _, class := range classes {
		log("reads of %s (embedded)", class.name)
		rep.add(compare(ctx, c, "Get List Items, "+class.name+", limit 100", "embedded", egw, 0,
			emb.read(class), gatewayRead(egw, class)))
	}
	for _, n := range []int{1, 10, 100} {
		log("adds of %d items (embedded)", n)
		rep.add(compare(ctx, c, fmt.Sprintf("Add List Items, %d per call", n), "embedded", egw, 0,
			emb.add(n), gatewayAdd(egw, n)))
	}
	return rep, nil
}

func openCQL(ctx context.Context, hosts []string, keyspace string, strategy cql.RemoveStrategy, migrate bool) (*cql.Store, error) {
	cfg := cql.DefaultConfig()
	cfg.Hosts, cfg.Keyspace, cfg.RemoveStrategy = hosts, keyspace, strategy
	cfg.Timeout = 10 * time.Second
	s, err := cql.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if migrate {
		if err := s.Migrate(ctx, cql.DefaultSchema()); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// seed creates the read and write features and fills every list.
func seed(ctx context.Context, s store.Store) (*store.Feature, *store.Feature, error) {
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: featureName, ValueType: store.String, TTL: 7 * 24 * time.Hour})
	if err != nil {
		return nil, nil, err
	}
	w, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: writeName, ValueType: store.String, TTL: 24 * time.Hour})
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	type job struct {
		l     store.List
		items []store.NewItem
	}
	jobs := make(chan job)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for j := range jobs {
				if _, err := s.AddItems(ctx, j.l, j.items); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for _, class := range classes {
		for e := range class.entities {
			for start := 0; start < class.size; start += 1000 {
				items := make([]store.NewItem, 0, 1000)
				for i := start; i < min(start+1000, class.size); i++ {
					items = append(items, store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Second).UnixNano(), Value: value(i)})
				}
				jobs <- job{store.List{Feature: &f, EntityID: entityID(class, e)}, items}
			}
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return nil, nil, err
	default:
	}
	return &f, &w, nil
}

// rawSession is a gocql session set up as the gateway's is: token-aware
// routing, two connections per host, LOCAL_QUORUM.
func rawSession(hosts []string) (*gocql.Session, error) {
	cluster := gocql.NewCluster(hosts...)
	cluster.Consistency = gocql.LocalQuorum
	cluster.NumConns = cql.DefaultConfig().NumConns
	cluster.Timeout = 10 * time.Second
	cluster.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy())
	return cluster.CreateSession()
}

// rawCQL issues the store's statements directly.
type rawCQL struct {
	session               *gocql.Session
	keyspace              string
	feature, writeFeature *store.Feature
}

func (r rawCQL) read(class listClass) op {
	stmt := "SELECT item_key, value FROM " + r.keyspace + ".list_items WHERE feature_key = ? AND entity_id = ? AND item_key >= ? AND item_key < ? LIMIT ?"
	z := newZipf(class.entities)
	fk := r.feature.Key()
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		iter := r.session.Query(stmt, fk, entityID(class, z.draw(rnd)), "", keys.MaxItemKey, readLimit+1).
			WithContext(ctx).PageSize(readLimit + 1).Idempotent(true).Iter()
		sc := iter.Scanner()
		n := 0
		for sc.Next() && n < readLimit {
			var key string
			var v []byte
			if err := sc.Scan(&key, &v); err != nil {
				return n, err
			}
			n++
		}
		return n, sc.Err()
	}
}

func (r rawCQL) add(n int) op {
	stmt := "INSERT INTO " + r.keyspace + ".list_items (feature_key, entity_id, item_key, value) VALUES (?, ?, ?, ?) USING TTL ?"
	z := newZipf(writeLists)
	fk := r.writeFeature.Key()
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		b := r.session.Batch(gocql.LoggedBatch).WithContext(ctx)
		id := fmt.Sprint("w", z.draw(rnd))
		now := time.Now().UnixNano()
		for range n {
			v := value(rnd.IntN(1e9))
			b.Entries = append(b.Entries, gocql.BatchEntry{Stmt: stmt, Args: []any{fk, id, keys.ItemKey(now, v), v, 86400}, Idempotent: true})
		}
		return n, r.session.ExecuteBatch(b)
	}
}

// storeCalls calls a store directly (the embedded store's baseline).
type storeCalls struct {
	s                     store.Store
	feature, writeFeature *store.Feature
}

func (s storeCalls) read(class listClass) op {
	z := newZipf(class.entities)
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		p, err := s.s.Items(ctx, store.List{Feature: s.feature, EntityID: entityID(class, z.draw(rnd))}, store.Range{Limit: readLimit})
		return len(p.Items), err
	}
}

func (s storeCalls) add(n int) op {
	z := newZipf(writeLists)
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		items := make([]store.NewItem, n)
		now := time.Now().UnixNano()
		for i := range items {
			items[i] = store.NewItem{Timestamp: now, Value: value(rnd.IntN(1e9))}
		}
		res, err := s.s.AddItems(ctx, store.List{Feature: s.writeFeature, EntityID: fmt.Sprint("w", z.draw(rnd))}, items)
		return res.Added, err
	}
}

const readQuery = `query Read($id: ID!) { listItems(entityType: "user", entityId: $id, feature: "` + featureName + `", limit: 100) { items { value timestamp cursor } hasMore endCursor } }`

func gatewayRead(g *gateway, class listClass) op {
	z := newZipf(class.entities)
	// Request bodies are made up front, as the gocql side's statements are.
	bodies := make([][]byte, class.entities)
	for i := range bodies {
		bodies[i], _ = json.Marshal(map[string]any{"query": readQuery, "variables": map[string]string{"id": entityID(class, i)}})
	}
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		b, err := g.post(ctx, bodies[z.draw(rnd)])
		return bytes.Count(b, []byte(`"cursor":`)), err
	}
}

const addQuery = `mutation Add($id: ID!, $items: [ListItemInput!]!) { addListItems(list: {entityType: "user", entityId: $id, feature: "` + writeName + `"}, items: $items) { added } }`

func gatewayAdd(g *gateway, n int) op {
	z := newZipf(writeLists)
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		items := make([]map[string]string, n)
		for i := range items {
			items[i] = map[string]string{"value": string(value(rnd.IntN(1e9)))}
		}
		body, _ := json.Marshal(map[string]any{"query": addQuery, "variables": map[string]any{"id": fmt.Sprint("w", z.draw(rnd)), "items": items}})
		_, err := g.post(ctx, body)
		return n, err
	}
}

// compare measures a baseline and the gateway on the same operation, runs
// times each, alternating which goes first. database is the pid of the
// database process (0: none, or unknown).
func compare(ctx context.Context, c config, name, db string, g *gateway, database int, base, gw op) comparison {
	var bases, gws []result
	const maxOps = 1 << 22
	for i := range c.runs {
		b := func() {
			bases = append(bases, run(ctx, meter{database: database}, c.concurrency, c.duration, maxOps, base))
		}
		w := func() {
			gws = append(gws, run(ctx, meter{gateway: g.cmd.Process.Pid, database: database}, c.concurrency, c.duration, maxOps, gw))
		}
		if i%2 == 0 {
			b()
			w()
		} else {
			w()
			b()
		}
	}
	return newComparison(name, db, bases, gws)
}

// cassandraPid finds the node scripts/cassandra started on the first host.
func cassandraPid(hosts []string) int {
	host, _, _ := strings.Cut(hosts[0], ":")
	b, err := os.ReadFile(filepath.Join(".run", "cassandra", host, "pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}
