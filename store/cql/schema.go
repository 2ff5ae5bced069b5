package cql

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/errkind"
	"github.com/listgate/listgate/store/keys"
)

// Schema says how Migrate creates the keyspace and tables.
type Schema struct {
	// Replication is the keyspace's replication map in CQL, e.g.
	// {'class': 'NetworkTopologyStrategy', 'dc1': 3}.
	Replication string
	// DefaultTTL is list_items' default_time_to_live: a safeguard for rows
	// written without a TTL by anything other than this store, which always
	// sends one.
	DefaultTTL time.Duration
}

// DefaultSchema suits a single development node.
func DefaultSchema() Schema {
	return Schema{
		Replication: "{'class': 'SimpleStrategy', 'replication_factor': 1}",
		DefaultTTL:  365 * 24 * time.Hour,
	}
}

// Statement is one statement of the schema: the CQL Migrate runs, and the
// note `listgate schema` prints above it for a DBA.
type Statement struct {
	CQL  string
	Note string // lines; what may be tuned and what the gateway rests on
}

// Statements are the schema's statements, in the order Migrate runs them:
// the one source of both Migrate and `listgate schema`. The change feed's
// retention sets list_changes' TTL.
func Statements(keyspace string, sc Schema, feed FeedConfig) ([]Statement, error) {
	repl := strings.TrimSpace(sc.Replication)
	switch {
	case !validKeyspace(keyspace):
		return nil, fmt.Errorf("%w keyspace %q: must match [a-z][a-z0-9_]{0,47}", errkind.Invalid, keyspace)
	case !strings.HasPrefix(repl, "{") || !strings.HasSuffix(repl, "}") || strings.ContainsAny(repl, ";"):
		return nil, fmt.Errorf("%w replication %q: must be a CQL map such as {'class': 'NetworkTopologyStrategy', 'dc1': 3}", errkind.Invalid, sc.Replication)
	case sc.DefaultTTL < time.Second || sc.DefaultTTL > keys.MaxTTL:
		return nil, fmt.Errorf("%w default TTL %v: must be from 1s to 20 years", errkind.Invalid, sc.DefaultTTL)
	case feed.Retention < time.Second:
		return nil, fmt.Errorf("%w change feed retention %v: must be 1s or more", errkind.Invalid, feed.Retention)
	}
	ks := keyspace
	return []Statement{{
		CQL: "CREATE KEYSPACE IF NOT EXISTS " + ks + " WITH replication = " + repl,
		Note: `Tune: the replication, to the cluster's data centres (in production
NetworkTopologyStrategy with 3 replicas in each; --cql-replication sets it
here). The keyspace's name is --cql-keyspace's. Keep durable_writes on.`,
	}, {
		// The published design's table, byte for byte.
		CQL: fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.list_items (
  feature_key TEXT,
  entity_id   TEXT,
  item_key    TEXT,
  value       BLOB,
  PRIMARY KEY ((feature_key, entity_id), item_key)
) WITH CLUSTERING ORDER BY (item_key DESC)
  AND default_time_to_live = %d`, ks, int64(sc.DefaultTTL/time.Second)),
		Note: `Every item of every list, one partition per list.
Keep: the columns, their names and types, the primary key and the
clustering order: every statement of the gateway names them, and a page
reads newest first in the order of item_key.
Tune: default_time_to_live (a safeguard only: every write sends its
item's own TTL), compaction, caching, gc_grace_seconds (deletions and
trims write tombstones: keep it above the interval of your repairs), and
any other table option. Unset options take the cluster's defaults.`,
	}, {
		// One partition per entity type: listing an entity type's features
		// reads one partition. A deleted feature keeps its row, marked; one
		// created again over it records from when its items count
		// (items_since, µs). A feature is live (its adds recorded in
		// list_changes) unless live is false: rows written before the
		// column existed read as live; live_since is when it was last
		// made live, null when live since its creation.
		CQL: `CREATE TABLE IF NOT EXISTS ` + ks + `.list_features (
  entity_type    TEXT,
  name           TEXT,
  version        TEXT,
  value_type     TEXT,
  ttl_seconds    INT,
  description    TEXT,
  created_at     TIMESTAMP,
  deleted_at     TIMESTAMP,
  max_items      INT,
  items_since    BIGINT,
  live           BOOLEAN,
  live_since     TIMESTAMP,
  PRIMARY KEY ((entity_type), name, version)
)`,
		Note: `The features, one partition per entity type, changed only through
lightweight transactions (SERIAL or LOCAL_SERIAL).
Keep: the columns, their names and types, and the primary key.
Tune: compaction, caching, gc_grace_seconds; the table is small and read
in whole every --feature-refresh by each gateway.`,
	}, {
		// The change feed: a record per add, by time bucket and shard, in
		// the order of the cluster's clock; records only ever expire.
		CQL: fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.list_changes (
  bucket      BIGINT,
  shard       INT,
  id          TIMEUUID,
  feature_key TEXT,
  created_at  TIMESTAMP,
  entity_id   TEXT,
  item_keys   LIST<TEXT>,
  item_values LIST<BLOB>,
  bytes       INT,
  PRIMARY KEY ((bucket, shard), id)
) WITH default_time_to_live = %d
  AND compaction = {'class': 'TimeWindowCompactionStrategy', 'compaction_window_unit': 'MINUTES', 'compaction_window_size': 10}
  AND gc_grace_seconds = 3600`, ks, int64(feed.Retention/time.Second)),
		Note: `The change feed live lists read: a record per add, by 10-second bucket
and shard (--change-feed-shards), written with a TTL and never deleted.
Keep: the columns, their names and types, and the primary key.
Tune: compaction (time windows suit rows that only expire), the window's
size, gc_grace_seconds (no row is ever deleted, so no tombstone needs
repair to spread), default_time_to_live (a safeguard: every write sends
the feed's retention as its TTL), caching.`,
	}, {
		// Each gateway that records adds: its closed time (every record it
		// stamped before it is written) and its lease's end, in ticks of
		// the records' time UUIDs; readers settle at the lowest of the
		// leases that have not ended.
		CQL: `CREATE TABLE IF NOT EXISTS ` + ks + `.list_change_writers (
  feed    INT,
  writer  UUID,
  closed  BIGINT,
  expires BIGINT,
  PRIMARY KEY ((feed), writer)
) WITH default_time_to_live = 60
  AND gc_grace_seconds = 60`,
		Note: `The gateways that write the change feed: a row each, renewed ten times a
second while it records adds, read by each gateway with subscriptions at
every poll of the feed. One partition, a few rows.
Keep: the columns, their names and types, and the primary key.
Tune: gc_grace_seconds (a row that comes back after its deletion names a
lease long ended, which readers pass over), caching.`,
	}}, nil
}

// WriteSchema writes the statements as a CQL file a DBA may read, tune and
// apply (cqlsh -f): each statement under its note, ended by a semicolon.
func WriteSchema(w io.Writer, keyspace string, sc Schema, feed FeedConfig) error {
	stmts, err := Statements(keyspace, sc, feed)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(comment(`The schema of listgate's CQL store: what listgate migrate runs, printed
by listgate schema. Apply it with cqlsh -f, or with listgate migrate;
then start the gateways.

Each statement says what a DBA may tune and what must stay as it is.
Table options may be changed before or after (ALTER TABLE ... WITH): the
gateway never changes them, and listgate migrate creates only what is
missing.`))
	for _, st := range stmts {
		b.WriteString("\n")
		b.WriteString(comment(st.Note))
		b.WriteString(st.CQL + ";\n")
	}
	b.WriteString("\n")
	upgrade := "A list_features table made by an earlier release lacks columns, which\nlistgate migrate adds; by hand:"
	for _, c := range featureColumns {
		upgrade += "\n  " + fmt.Sprintf(newStatements(keyspace).addFeatureColumn, c) + ";"
	}
	b.WriteString(comment(upgrade))
	_, err = io.WriteString(w, b.String())
	return err
}

// comment turns lines of text into CQL comment lines.
func comment(text string) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		b.WriteString(strings.TrimRight("-- "+line, " ") + "\n")
	}
	return b.String()
}

// Migrate creates the keyspace and the tables where they do not exist yet,
// and adds to list_features the columns a table made by an earlier release
// lacks. It never drops anything.
func (s *Store) Migrate(ctx context.Context, sc Schema) error {
	stmts, err := Statements(s.cfg.Keyspace, sc, s.cfg.Feed)
	if err != nil {
		return err
	}
	for _, st := range stmts {
		// DDL waits for schema agreement, which takes longer than a read.
		err := s.session.Query(st.CQL).WithContext(ctx).SetRequestTimeout(time.Minute).Exec()
		if err != nil {
			return classify("migrating the schema", err)
		}
	}
	missing, err := s.missingFeatureColumns(ctx, "")
	if err != nil {
		return err
	}
	for _, c := range missing {
		err := s.session.Query(fmt.Sprintf(s.stmt.addFeatureColumn, c)).WithContext(ctx).SetRequestTimeout(time.Minute).Exec()
		if err != nil {
			return classify("migrating the schema", err)
		}
	}
	if err := s.session.AwaitSchemaAgreement(ctx); err != nil {
		return classify("waiting for schema agreement", err)
	}
	return nil
}

// featureColumns are the columns of list_features added since the first
// release, with their types.
var featureColumns = []string{"max_items INT", "items_since BIGINT", "live BOOLEAN", "live_since TIMESTAMP"}

// missingFeatureColumns lists those list_features lacks, as the node
// hostID sees it ("": any node).
func (s *Store) missingFeatureColumns(ctx context.Context, hostID string) ([]string, error) {
	q := s.session.Query(s.stmt.schemaColumns, s.cfg.Keyspace).WithContext(ctx).Consistency(gocql.One).Idempotent(true)
	if hostID != "" {
		q = q.SetHostID(hostID)
	}
	iter := q.Iter()
	have := map[string]bool{}
	var name string
	for iter.Scan(&name) {
		have[name] = true
	}
	if err := iter.Close(); err != nil {
		return nil, classify("checking the schema", err)
	}
	var missing []string
	for _, c := range featureColumns {
		if !have[strings.Fields(c)[0]] {
			missing = append(missing, c)
		}
	}
	return missing, nil
}

// Ready reports whether the cluster answers and the schema is in place.
// Every node the driver knows is asked at once, and the first to answer
// decides: the driver routes one question to the same node every time, so
// one node frozen or cut off (a long pause, a partition) made every
// gateway unready while the other two served them.
func (s *Store) Ready(ctx context.Context) error {
	hosts := s.session.GetHosts()
	if len(hosts) == 0 {
		return s.readyOn(ctx, "")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the nodes slower than the first to answer
	answers := make(chan error, len(hosts))
	for _, h := range hosts {
		go func() { answers <- s.readyOn(ctx, h.HostID()) }()
	}
	var first error // the quickest to come says most: a table missing, a node refusing
	for range hosts {
		err := <-answers
		if err == nil {
			return nil
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// readyOn is Ready as the node hostID answers it ("": any node).
func (s *Store) readyOn(ctx context.Context, hostID string) error {
	q := s.session.Query(s.stmt.schemaTables, s.cfg.Keyspace).WithContext(ctx).Consistency(gocql.One).Idempotent(true)
	if hostID != "" {
		q = q.SetHostID(hostID)
	}
	iter := q.Iter()
	tables := map[string]bool{}
	var name string
	for iter.Scan(&name) {
		tables[name] = true
	}
	if err := iter.Close(); err != nil {
		return classify("checking the schema", err)
	}
	for _, t := range []string{"list_items", "list_features", "list_changes", "list_change_writers"} {
		if !tables[t] {
			return fmt.Errorf("table %s.%s is missing: %s", s.cfg.Keyspace, t, runMigrate)
		}
	}
	missing, err := s.missingFeatureColumns(ctx, hostID)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("table %s.list_features lacks columns %s: %s", s.cfg.Keyspace, strings.Join(missing, ", "), runMigrate)
	}
	return nil
}

// runMigrate is what to do when the schema is missing or of an earlier
// release: the step production runs, and the development flag.
const runMigrate = "run listgate migrate with the gateway's cluster flags (in development, the gateway's --migrate does the same)"
