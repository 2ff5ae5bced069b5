package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/endpoint"
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
	readLimit      = 100
	featureName    = "reading_history"
	writeName      = "story_presented"
	cappedName     = "story_presented_capped" // writeName with a cap
	listCap        = 1000                     // maxItems of cappedName
	containsValues = 1000                     // values of one listContains
)

func entityID(class listClass, i int) string { return fmt.Sprintf("c%d-u%d", class.size, i) }

// addTarget is the lists adds write to: entities prefix0, prefix1, … of a
// feature, drawn Zipf-like.
type addTarget struct {
	feature, prefix string
	lists           int
}

func (t addTarget) entity(i int) string { return fmt.Sprint(t.prefix, i) }

var (
	// The lists of the adds against gocql and the embedded store: empty
	// when the run begins.
	writes = addTarget{writeName, "w", 1000}
	// The same lists of a feature without a cap and of one with, each
	// seeded with listCap items.
	uncapped = addTarget{writeName, "k", 100}
	capped   = addTarget{cappedName, "k", 100}
)

func value(i int) []byte { return fmt.Appendf(nil, "story%09d", i) }

// measure runs every scenario and gathers the report.
func measure(ctx context.Context, c config) (*report, error) {
	rep := &report{Machine: machine(), Date: time.Now().UTC().Format(time.RFC3339), Concurrency: c.concurrency,
		Duration: c.duration.String(), PeerDuration: c.peerDuration.String(), Runs: c.runs, Command: "make bench"}
	if c.quick {
		classes = []listClass{{"10-item lists", 10, 200}, {"1,000-item lists", 1000, 3}}
	}
	bin := c.gatewayBin
	if bin == "" {
		var err error
		if bin, err = build("listgate", "."); err != nil {
			return nil, fmt.Errorf("building the gateway: %w", err)
		}
	}
	if c.does("slownode") {
		var err error
		if rep.SlowNode, err = slowNode(ctx, c, bin); err != nil {
			return nil, err
		}
		if c.only == "slownode" {
			return rep, nil
		}
	}
	keyspace := fmt.Sprintf("listgate_bench_%d", time.Now().Unix())
	hosts := strings.Split(c.cqlHosts, ",")
	log := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

	// The CQL store: seeded once, read by the gateway and by raw gocql.
	log("seeding keyspace %s on %s", keyspace, c.cqlHosts)
	cs, err := openCQL(ctx, hosts, keyspace)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	session, err := rawSession(hosts)
	if err != nil {
		return nil, err
	}
	defer session.Close()
	defer func() {
		// A cluster named by --cql-hosts outlives the run: leave no data on it.
		if err := session.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec(); err != nil {
			log("dropping keyspace %s: %v", keyspace, err)
		}
	}()
	feature, writeFeature, err := seed(ctx, cs)
	if err != nil {
		return nil, err
	}
	if c.does("caps") {
		if err := seedCapped(ctx, cs, writeFeature); err != nil {
			return nil, err
		}
	}
	gw, err := startGateway(bin, c.concurrency, "--cql-hosts", c.cqlHosts, "--cql-keyspace", keyspace)
	if err != nil {
		return nil, err
	}
	defer gw.stop()

	raw := rawCQL{session: session, keyspace: keyspace, feature: feature, writeFeature: writeFeature}
	dbPid := databasePid(hosts)
	if c.does("peers") || c.does("peeradds") {
		if rep.Peers, rep.PeerFanOut, err = peers(ctx, c, keyspace, gw, raw, dbPid); err != nil {
			return nil, err
		}
	}
	for _, class := range classes {
		if !c.does("contains") {
			break
		}
		log("listContains on %s (CQL)", class.name)
		rep.add(compare(ctx, c, c.concurrency, fmt.Sprintf("listContains, %s values, %s", grouped(containsValues), class.name), "CQL", gw, dbPid,
			raw.keys(class), gatewayContains(gw, class)))
	}
	for _, class := range classes {
		if !c.does("count") {
			break
		}
		log("listCount on %s (CQL)", class.name)
		rep.add(compare(ctx, c, c.concurrency, "listCount, "+class.name, "CQL", gw, dbPid,
			raw.keys(class), gatewayCount(gw, class)))
	}
	for _, n := range []int{1, 10, 100} {
		if !c.does("adds") {
			break
		}
		log("adds of %d items (CQL)", n)
		rep.add(compare(ctx, c, c.concurrency, fmt.Sprintf("Add List Items, %d per call", n), "CQL", gw, dbPid,
			raw.add(n), gatewayAdd(gw, writes, n)))
	}
	if c.does("distinct") {
		class := classes[1] // the 1,000-item lists, in a quick run too
		log("distinct reads of %s", class.name)
		rep.addAlternative(compare(ctx, c, c.concurrency, "listItems distinct: true vs plain, "+class.name+", limit 100", "CQL", gw, dbPid,
			gatewayRead(gw, class, readQuery), gatewayRead(gw, class, distinctReadQuery)))
	}
	for _, n := range []int{1, 10} {
		if !c.does("caps") {
			break
		}
		log("adds of %d items, capped and not", n)
		rep.addAlternative(compare(ctx, c, c.concurrency, fmt.Sprintf("addListItems, %d per call, maxItems %d vs no cap", n, listCap), "CQL", gw, dbPid,
			gatewayAdd(gw, uncapped, n), gatewayAdd(gw, capped, n)))
	}
	if c.does("batch") {
		log("addListItemsBatch")
		rep.addAlternative(batchAdds(ctx, c, gw, dbPid, 100, 10))
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
		if rep.Removes, err = removes(ctx, c, cs); err != nil {
			return nil, err
		}
	}
	if c.does("live") {
		if rep.Live, err = liveLists(ctx, c, bin, keyspace); err != nil {
			return nil, err
		}
	}
	if c.does("tenants") {
		if rep.Tenants, err = tenants(ctx, c, bin, keyspace, cs, dbPid); err != nil {
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
		rep.add(compare(ctx, c, c.concurrency, "Get List Items, "+class.name+", limit 100", "embedded", egw, 0,
			emb.read(class), gatewayRead(egw, class, readQuery)))
	}
	for _, n := range []int{1, 10, 100} {
		log("adds of %d items (embedded)", n)
		rep.add(compare(ctx, c, c.concurrency, fmt.Sprintf("Add List Items, %d per call", n), "embedded", egw, 0,
			emb.add(n), gatewayAdd(egw, writes, n)))
	}
	return rep, nil
}

func openCQL(ctx context.Context, hosts []string, keyspace string) (*cql.Store, error) {
	cfg := cql.DefaultConfig()
	cfg.Hosts, cfg.Keyspace = hosts, keyspace
	cfg.Timeout = 10 * time.Second
	s, err := cql.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := s.Migrate(ctx, cql.DefaultSchema()); err != nil {
		s.Close()
		return nil, err
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
	for _, class := range classes {
		lists := make([]store.List, class.entities)
		for e := range lists {
			lists[e] = store.List{Feature: &f, EntityID: entityID(class, e)}
		}
		if err := fill(ctx, s, class.size, lists...); err != nil {
			return nil, nil, err
		}
	}
	return &f, &w, nil
}

// seedCapped creates the capped feature, as the write feature w but for
// its cap, and fills the lists of both that the cap comparison adds to
// with listCap items each, so that the capped ones are full.
func seedCapped(ctx context.Context, s store.Store, w *store.Feature) error {
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: w.EntityType, Name: cappedName, ValueType: w.ValueType, TTL: w.TTL, MaxItems: listCap})
	if err != nil {
		return err
	}
	var lists []store.List
	for i := range capped.lists {
		lists = append(lists, store.List{Feature: &f, EntityID: capped.entity(i)}, store.List{Feature: w, EntityID: uncapped.entity(i)})
	}
	return fill(ctx, s, listCap, lists...)
}

// fill adds size items to each list: value(i) i seconds before now, for
// i from 0; eight adds of up to 1,000 items at once.
func fill(ctx context.Context, s store.Store, size int, lists ...store.List) error {
	type job struct {
		l     store.List
		start int
	}
	now := time.Now()
	jobs := make(chan job)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for j := range jobs {
				items := make([]store.NewItem, 0, 1000)
				for i := j.start; i < min(j.start+1000, size); i++ {
					items = append(items, store.NewItem{Timestamp: now.Add(-time.Duration(i) * time.Second).UnixNano(), Value: value(i)})
				}
				if _, err := s.AddItems(ctx, j.l, items); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for _, l := range lists {
		for start := 0; start < size; start += 1000 {
			jobs <- job{l, start}
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
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

// selectItems is the store's read of a list's rows between two keys.
func (r rawCQL) selectItems(columns string) string {
	return "SELECT " + columns + " FROM " + r.keyspace + ".list_items WHERE feature_key = ? AND entity_id = ? AND item_key >= ? AND item_key < ? LIMIT ?"
}

// read reads a page of limit items of a list of class.
func (r rawCQL) read(class listClass, limit int) op {
	stmt := r.selectItems("item_key, value")
	z := newZipf(class.entities)
	fk := r.feature.Key()
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		iter := r.session.Query(stmt, fk, entityID(class, z.draw(rnd)), "", keys.MaxItemKey, limit+1).
			WithContext(ctx).PageSize(limit + 1).Idempotent(true).Iter()
		sc := iter.Scanner()
		n := 0
		for sc.Next() && n < limit {
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

// keys reads every key of a list, as the store counts a list or searches
// it for values: one query, as many rows as the gateway may look at, paged
// by 5,000. Its items are the keys read.
func (r rawCQL) keys(class listClass) op {
	stmt := r.selectItems("item_key")
	z := newZipf(class.entities)
	fk := r.feature.Key()
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		iter := r.session.Query(stmt, fk, entityID(class, z.draw(rnd)), "", keys.MaxItemKey, endpoint.DefaultLimits.MaxCount+1).
			WithContext(ctx).PageSize(5000).Idempotent(true).Iter()
		sc := iter.Scanner()
		n := 0
		var key string
		for sc.Next() {
			if err := sc.Scan(&key); err != nil {
				return n, err
			}
			n++
		}
		return n, sc.Err()
	}
}

func (r rawCQL) add(n int) op {
	stmt := "INSERT INTO " + r.keyspace + ".list_items (feature_key, entity_id, item_key, value) VALUES (?, ?, ?, ?) USING TTL ?"
	z := newZipf(writes.lists)
	fk := r.writeFeature.Key()
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		b := r.session.Batch(gocql.LoggedBatch).WithContext(ctx)
		id := writes.entity(z.draw(rnd))
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
	z := newZipf(writes.lists)
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		items := make([]store.NewItem, n)
		now := time.Now().UnixNano()
		for i := range items {
			items[i] = store.NewItem{Timestamp: now, Value: value(rnd.IntN(1e9))}
		}
		res, err := s.s.AddItems(ctx, store.List{Feature: s.writeFeature, EntityID: writes.entity(z.draw(rnd))}, items)
		return res.Added, err
	}
}

// listItemsQuery reads a page of limit items of a read list, with more
// arguments of listItems.
func listItemsQuery(limit int, args string) string {
	return `query Read($id: ID!) { listItems(entityType: "user", entityId: $id, feature: "` + featureName + `", limit: ` + strconv.Itoa(limit) + args + `) { items { value timestamp cursor } hasMore endCursor } }`
}

var (
	readQuery         = listItemsQuery(readLimit, "")
	distinctReadQuery = listItemsQuery(readLimit, ", distinct: true")
)

const (
	containsQuery = `query Contains($id: ID!, $values: [ListValue!]!) { entity(type: "user", entityId: $id) { listContains(feature: "` + featureName + `", values: $values) { timestamp } } }`
	countQuery    = `query Count($id: ID!) { listCount(entityType: "user", entityId: $id, feature: "` + featureName + `") }`
)

// entityRequests posts a query about one entity of a class, drawn
// Zipf-like, and counts the items of the answer with items. The request
// bodies, one per entity, are made up front, as the gocql side's
// statements are.
func entityRequests(g *server, class listClass, query string, vars map[string]any, items func(answer []byte) (int, error)) op {
	z := newZipf(class.entities)
	bodies := make([][]byte, class.entities)
	for i := range bodies {
		v := map[string]any{"id": entityID(class, i)}
		maps.Copy(v, vars)
		bodies[i], _ = json.Marshal(map[string]any{"query": query, "variables": v})
	}
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		b, err := g.post(ctx, bodies[z.draw(rnd)])
		if err != nil {
			return 0, err
		}
		return items(b)
	}
}

func gatewayRead(g *server, class listClass, query string) op {
	return entityRequests(g, class, query, nil, func(b []byte) (int, error) { return bytes.Count(b, []byte(`"cursor":`)), nil })
}

// gatewayContains asks for containsValues values: half of them in the list
// (all of a list that holds fewer), the others in no list, so that the
// whole list is read. Its items are the keys read.
func gatewayContains(g *server, class listClass) op {
	present := min(containsValues/2, class.size)
	vs := make([]string, 0, containsValues)
	for i := range present {
		vs = append(vs, string(value(i*class.size/present)))
	}
	for i := range containsValues - present {
		vs = append(vs, string(value(class.size+i)))
	}
	return entityRequests(g, class, containsQuery, map[string]any{"values": vs}, func(b []byte) (int, error) {
		if n := bytes.Count(b, []byte(`"timestamp":`)); n != present {
			return 0, fmt.Errorf("listContains found %d values, not %d: %.200s", n, present, b)
		}
		return class.size, nil
	})
}

// gatewayCount counts a whole list. Its items are the keys read.
func gatewayCount(g *server, class listClass) op {
	want := fmt.Appendf(nil, `"listCount":%d}`, class.size)
	return entityRequests(g, class, countQuery, nil, func(b []byte) (int, error) {
		if !bytes.Contains(b, want) {
			return 0, fmt.Errorf("listCount is not %d: %.200s", class.size, b)
		}
		return class.size, nil
	})
}

// addQuery adds items to one list of t.
func (t addTarget) addQuery() string {
	return `mutation Add($id: ID!, $items: [ListItemInput!]!) { addListItems(list: {entityType: "user", entityId: $id, feature: "` + t.feature + `"}, items: $items) { added } }`
}

// newItems are n items of random values, as addListItems takes them.
func newItems(rnd *rand.Rand, n int) []map[string]string {
	items := make([]map[string]string, n)
	for i := range items {
		items[i] = map[string]string{"value": string(value(rnd.IntN(1e9)))}
	}
	return items
}

func addRequest(query, id string, items []map[string]string) []byte {
	body, _ := json.Marshal(map[string]any{"query": query, "variables": map[string]any{"id": id, "items": items}})
	return body
}

func gatewayAdd(g *server, t addTarget, n int) op {
	z := newZipf(t.lists)
	query := t.addQuery()
	return func(ctx context.Context, rnd *rand.Rand) (int, error) {
		_, err := g.post(ctx, addRequest(query, t.entity(z.draw(rnd)), newItems(rnd, n)))
		return n, err
	}
}

// compare measures two operations, a baseline and the gateway's (or two
// ways of doing one thing through the gateway), runs times each,
// alternating which goes first, with inFlight requests in flight, and
// the CPU of the gateway and of the database (its pid; 0: none, or
// unknown) on both sides.
func compare(ctx context.Context, c config, inFlight int, name, db string, g *server, database int, base, gw op) comparison {
	m := meter{server: g.cmd.Process.Pid, database: database}
	bases, gws := alternate(ctx, c, m, inFlight, base, gw)
	return newComparison(name, db, inFlight, bases, gws)
}

// alternate measures a and b runs times each, alternating which goes
// first.
func alternate(ctx context.Context, c config, m meter, inFlight int, a, b op) (as, bs []result) {
	rs := rotate(ctx, c.runs, c.duration, inFlight, measured{m, a}, measured{m, b})
	return rs[0], rs[1]
}

// measured is an operation and the processes whose CPU it costs.
type measured struct {
	m meter
	f op
}

// rotate measures each of sides runs times for d, the first of the sides
// first in the first round, the second first in the next, and so on; its
// results are by side, then by round.
func rotate(ctx context.Context, runs int, d time.Duration, inFlight int, sides ...measured) [][]result {
	const maxOps = 1 << 22
	out := make([][]result, len(sides))
	for i := range runs {
		for j := range sides {
			k := (i + j) % len(sides)
			out[k] = append(out[k], run(ctx, sides[k].m, inFlight, d, maxOps, sides[k].f))
		}
	}
	return out
}

// databasePid finds the process on this machine that listens on the first
// host's CQL port (0 if none does), to measure the database's CPU.
func databasePid(hosts []string) int {
	host, port, err := net.SplitHostPort(hosts[0])
	if err != nil {
		host, port = hosts[0], "9042"
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return 0
	}
	sockets := map[string]bool{} // "socket:[inode]" of the listeners
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, _ := os.ReadFile(table)
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: listening
				continue
			}
			addr, p, _ := strings.Cut(f[1], ":")
			if lp, err := strconv.ParseUint(p, 16, 16); err != nil || strconv.FormatUint(lp, 10) != port {
				continue
			}
			if ip := procNetIP(addr); ip.IsUnspecified() || ip.Equal(ips[0]) {
				sockets["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(sockets) == 0 {
		return 0
	}
	procs, _ := os.ReadDir("/proc")
	for _, proc := range procs {
		pid, err := strconv.Atoi(proc.Name())
		if err != nil {
			continue
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if link, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); sockets[link] {
				return pid
			}
		}
	}
	return 0
}

// procNetIP decodes an address of /proc/net/tcp: hex, each 32-bit word in
// the host's byte order (little-endian on amd64 and arm64).
func procNetIP(h string) net.IP {
	b, err := hex.DecodeString(h)
	if err != nil {
		return nil
	}
	for i := 0; i+4 <= len(b); i += 4 {
		slices.Reverse(b[i : i+4])
	}
	return net.IP(b)
}
