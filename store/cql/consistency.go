package cql

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/errkind"
)

// CheckFeedConsistency makes sure that no reader of the change feed can
// pass a record it cannot read yet, and sets the level records and leases
// are written at. A reader settles where every writer says its records
// are written (lease.go); it reads them only if the replicas it reads
// overlap those written to, in every data centre a reader may be in. So:
//
//   - in one data centre, the replicas read and written must add up to
//     more than the replication factor (R + W > RF), or the gateway
//     refuses to start, naming the flags;
//   - on a keyspace spanning data centres, records and leases are written
//     at EACH_QUORUM (unless at ALL), so that a reader at LOCAL_QUORUM in
//     any of them overlaps them: a live add then needs a quorum in every
//     data centre, as the feed's order does; reads at LOCAL_ONE are
//     refused.
//
// Run once the keyspace exists (after Ready); a keyspace of a replication
// strategy it does not know is left as it is.
func (s *Store) CheckFeedConsistency(ctx context.Context) error {
	var repl map[string]string
	err := s.session.Query(s.stmt.selectReplication, s.cfg.Keyspace).WithContext(ctx).Consistency(gocql.One).Idempotent(true).Scan(&repl)
	if errors.Is(err, gocql.ErrNotFound) {
		return fmt.Errorf("keyspace %s does not exist: %s", s.cfg.Keyspace, runMigrate)
	}
	if err != nil {
		return classify("reading the keyspace's replication", err)
	}
	level, err := feedWriteLevel(repl, s.cfg.ReadConsistency, s.cfg.WriteConsistency)
	if err != nil {
		return fmt.Errorf("keyspace %s: %w", s.cfg.Keyspace, err)
	}
	s.feedWrite = level
	return nil
}

// KeyspaceExists reports whether the keyspace is there: Migrate creates
// it when it is not.
func (s *Store) KeyspaceExists(ctx context.Context) (bool, error) {
	var repl map[string]string
	err := s.session.Query(s.stmt.selectReplication, s.cfg.Keyspace).WithContext(ctx).Consistency(gocql.One).Idempotent(true).Scan(&repl)
	if errors.Is(err, gocql.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, classify("reading the keyspace's replication", err)
	}
	return true, nil
}

// FeedWriteConsistency is the level records and leases are written at.
func (s *Store) FeedWriteConsistency() gocql.Consistency { return s.feedWrite }

// feedWriteLevel is the level records are written at, given the
// keyspace's replication and the levels set, or why a reader could pass a
// record it cannot read.
func feedWriteLevel(repl map[string]string, read, write gocql.Consistency) (gocql.Consistency, error) {
	dcs, ok := replicasByDC(repl)
	if !ok {
		return write, nil
	}
	total := 0
	for _, n := range dcs {
		total += n
	}
	if read == gocql.EachQuorum || read == gocql.Any {
		return 0, fmt.Errorf("%w --cql-read-consistency %v: not a level reads may use", errkind.Invalid, read)
	}
	if len(dcs) == 1 {
		w, r := replicas(write, total, total), replicas(read, total, total)
		if w+r <= total {
			return 0, fmt.Errorf("%w --cql-read-consistency %v and --cql-write-consistency %v: with %d replicas they read %d and write %d, so a live subscription could pass an add's record that the replicas it reads do not hold yet, and never deliver it; choose levels whose replicas add up to more than %d (LOCAL_QUORUM for both, the default)",
				errkind.Invalid, read, write, total, r, w, total)
		}
		return write, nil
	}
	level := gocql.EachQuorum
	if write == gocql.All {
		level = gocql.All
	}
	written := 0
	for dc, n := range dcs {
		w, r := replicas(level, n, total), replicas(read, n, total)
		written += w
		if local(read) && w+r <= n {
			return 0, fmt.Errorf("%w --cql-read-consistency %v: the keyspace spans data centres, and with the change feed's records written at %v (%d of data centre %s's %d replicas), a read of %d of them could pass a record it does not hold yet; read at LOCAL_QUORUM",
				errkind.Invalid, read, level, w, dc, n, r)
		}
	}
	if r := replicas(read, total, total); !local(read) && written+r <= total {
		return 0, fmt.Errorf("%w --cql-read-consistency %v: it reads %d of %d replicas, which may miss the %d the change feed's records are written to; read at LOCAL_QUORUM",
			errkind.Invalid, read, r, total, written)
	}
	return level, nil
}

// replicasByDC reads a keyspace's replication: its replicas in each data
// centre ("" for SimpleStrategy's one), and false for a strategy it does
// not know.
func replicasByDC(repl map[string]string) (map[string]int, bool) {
	class := repl["class"]
	dcs := map[string]int{}
	switch {
	case strings.HasSuffix(class, "SimpleStrategy"):
		n, ok := replicaCount(repl["replication_factor"])
		if !ok {
			return nil, false
		}
		dcs[""] = n
	case strings.HasSuffix(class, "NetworkTopologyStrategy"):
		for k, v := range repl {
			if k == "class" || k == "replication_factor" {
				continue
			}
			n, ok := replicaCount(v)
			if !ok {
				return nil, false
			}
			if n > 0 {
				dcs[k] = n
			}
		}
	}
	return dcs, len(dcs) > 0
}

// replicaCount reads a replication factor: "3", or "3/1" (three replicas,
// one of them transient).
func replicaCount(v string) (int, bool) {
	full, _, _ := strings.Cut(v, "/")
	n, err := strconv.Atoi(strings.TrimSpace(full))
	return n, err == nil && n >= 0
}

// replicas is how many of a data centre's n replicas (of total in all) a
// level reads or writes there at least; for a level that counts replicas
// anywhere, of all of them.
func replicas(c gocql.Consistency, n, total int) int {
	switch c {
	case gocql.Any:
		return 0
	case gocql.One, gocql.LocalOne:
		return 1
	case gocql.Two:
		return 2
	case gocql.Three:
		return 3
	case gocql.Quorum, gocql.Serial:
		return total/2 + 1
	case gocql.LocalQuorum, gocql.EachQuorum, gocql.LocalSerial:
		return n/2 + 1
	case gocql.All:
		return n
	}
	return 0
}

// local says whether a level reads replicas of the reader's data centre
// only.
func local(c gocql.Consistency) bool {
	return c == gocql.LocalOne || c == gocql.LocalQuorum || c == gocql.LocalSerial
}
