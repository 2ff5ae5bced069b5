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

// Migrate creates the keyspace, the tables and, for RemoveByIndex, the value
// index, where they do not exist yet. It never drops or alters anything.
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
		// reads one partition. Deleted features keep their row, marked, until
		// they may be re-created.
		`CREATE TABLE IF NOT EXISTS ` + ks + `.list_features (
  entity_type    TEXT,
  name           TEXT,
  version        TEXT,
  value_type     TEXT,
  ttl_seconds    INT,
  description    TEXT,
  created_at     TIMESTAMP,
  deleted_at     TIMESTAMP,
  recreate_after TIMESTAMP,
  PRIMARY KEY ((entity_type), name, version)
)`,
	}
	if s.cfg.RemoveStrategy == RemoveByIndex {
		if s.scylla {
			ddl = append(ddl, "CREATE INDEX IF NOT EXISTS list_items_by_value ON "+ks+".list_items ((feature_key, entity_id), value)")
		} else {
			// Cassandra has no local index syntax, and 5.0's SAI cannot index
			// a blob; a legacy index restricted by partition key reads locally.
			ddl = append(ddl, "CREATE INDEX IF NOT EXISTS list_items_by_value ON "+ks+".list_items (value)")
		}
	}
	for _, q := range ddl {
		// DDL waits for schema agreement, which takes longer than a read.
		err := s.session.Query(q).WithContext(ctx).SetRequestTimeout(time.Minute).Exec()
		if err != nil {
			return classify("migrating the schema", err)
		}
	}
	if err := s.session.AwaitSchemaAgreement(ctx); err != nil {
		return classify("waiting for schema agreement", err)
	}
	return nil
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
	for _, t := range []string{"list_items", "list_features"} {
		if !tables[t] {
			return fmt.Errorf("table %s.%s is missing: run with --migrate", s.cfg.Keyspace, t)
		}
	}
	if s.cfg.RemoveStrategy == RemoveByIndex {
		if err := s.session.Query(s.stmt.schemaIndex, s.cfg.Keyspace).WithContext(ctx).Consistency(gocql.One).Scan(&name); err != nil {
			if err == gocql.ErrNotFound {
				return fmt.Errorf("index %s.list_items_by_value is missing: run with --migrate", s.cfg.Keyspace)
			}
			return classify("checking the schema", err)
		}
	}
	return nil
}
