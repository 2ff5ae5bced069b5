package cql

import (
	"context"
	"fmt"
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

// Migrate creates the keyspace and the tables where they do not exist yet,
// and adds to list_features the columns a table made by an earlier release
// lacks. It never drops anything.
func (s *Store) Migrate(ctx context.Context, sc Schema) error {
	repl := strings.TrimSpace(sc.Replication)
	if !strings.HasPrefix(repl, "{") || !strings.HasSuffix(repl, "}") || strings.ContainsAny(repl, ";") {
		return fmt.Errorf("%w replication %q: must be a CQL map such as {'class': 'NetworkTopologyStrategy', 'dc1': 3}", errkind.Invalid, sc.Replication)
	}
	if sc.DefaultTTL < time.Second || sc.DefaultTTL > keys.MaxTTL {
		return fmt.Errorf("%w default TTL %v: must be from 1s to 20 years", errkind.Invalid, sc.DefaultTTL)
	}
	ks := s.cfg.Keyspace
	ddl := []string{
		"CREATE KEYSPACE IF NOT EXISTS " + ks + " WITH replication = " + repl,
		// The published design's table, byte for byte.
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.list_items (
  feature_key TEXT,
  entity_id   TEXT,
  item_key    TEXT,
  value       BLOB,
  PRIMARY KEY ((feature_key, entity_id), item_key)
) WITH CLUSTERING ORDER BY (item_key DESC)
  AND default_time_to_live = %d`, ks, int64(sc.DefaultTTL/time.Second)),
		// One partition per entity type: listing an entity type's features
		// reads one partition. A deleted feature keeps its row, marked; one
		// created again over it records from when its items count
		// (items_since, µs).
		`CREATE TABLE IF NOT EXISTS ` + ks + `.list_features (
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
  PRIMARY KEY ((entity_type), name, version)
)`,
		// The change feed: a record per add, by time bucket and shard, in
		// the order of the cluster's clock; records only ever expire.
		fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.list_changes (
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
  AND gc_grace_seconds = 3600`, ks, int64(s.cfg.Feed.Retention/time.Second)),
	}
	for _, q := range ddl {
		// DDL waits for schema agreement, which takes longer than a read.
		err := s.session.Query(q).WithContext(ctx).SetRequestTimeout(time.Minute).Exec()
		if err != nil {
			return classify("migrating the schema", err)
		}
	}
	missing, err := s.missingFeatureColumns(ctx)
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
var featureColumns = []string{"max_items INT", "items_since BIGINT"}

// missingFeatureColumns lists those list_features lacks.
func (s *Store) missingFeatureColumns(ctx context.Context) ([]string, error) {
	iter := s.session.Query(s.stmt.schemaColumns, s.cfg.Keyspace).WithContext(ctx).Consistency(gocql.One).Idempotent(true).Iter()
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
func (s *Store) Ready(ctx context.Context) error {
	iter := s.session.Query(s.stmt.schemaTables, s.cfg.Keyspace).WithContext(ctx).Consistency(gocql.One).Idempotent(true).Iter()
	tables := map[string]bool{}
	var name string
	for iter.Scan(&name) {
		tables[name] = true
	}
	if err := iter.Close(); err != nil {
		return classify("checking the schema", err)
	}
	for _, t := range []string{"list_items", "list_features", "list_changes"} {
		if !tables[t] {
			return fmt.Errorf("table %s.%s is missing: run with --migrate", s.cfg.Keyspace, t)
		}
	}
	missing, err := s.missingFeatureColumns(ctx)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return fmt.Errorf("table %s.list_features lacks columns %s: run with --migrate", s.cfg.Keyspace, strings.Join(missing, ", "))
	}
	return nil
}
