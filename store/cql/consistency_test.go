package cql

import (
	"errors"
	"strings"
	"testing"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/errkind"
)

// Levels under which a reader could pass a record it cannot read yet are
// refused, naming the flags; on a keyspace spanning data centres records
// are written at EACH_QUORUM, which LOCAL_QUORUM readers overlap in each.
func TestFeedWriteLevel(t *testing.T) {
	simple := func(rf string) map[string]string {
		return map[string]string{"class": "org.apache.cassandra.locator.SimpleStrategy", "replication_factor": rf}
	}
	twoDCs := map[string]string{"class": "org.apache.cassandra.locator.NetworkTopologyStrategy", "dc1": "3", "dc2": "3"}
	for _, tc := range []struct {
		name        string
		repl        map[string]string
		read, write gocql.Consistency
		want        gocql.Consistency // 0: refused
		flags       []string
	}{
		{"one node, the defaults", simple("1"), gocql.LocalQuorum, gocql.LocalQuorum, gocql.LocalQuorum, nil},
		{"one node, ONE and ONE", simple("1"), gocql.One, gocql.One, gocql.One, nil},
		{"three replicas, the defaults", simple("3"), gocql.LocalQuorum, gocql.LocalQuorum, gocql.LocalQuorum, nil},
		{"three replicas, ONE and ONE", simple("3"), gocql.One, gocql.One, 0, []string{"--cql-read-consistency", "--cql-write-consistency", "3 replicas"}},
		{"three replicas, ONE and ALL", simple("3"), gocql.One, gocql.All, gocql.All, nil},
		{"three replicas, QUORUM and ONE", simple("3"), gocql.Quorum, gocql.One, 0, []string{"--cql-read-consistency"}},
		{"one data centre by NetworkTopologyStrategy, transient", map[string]string{"class": "NetworkTopologyStrategy", "dc1": "3/1"}, gocql.LocalOne, gocql.LocalQuorum, 0, []string{"--cql-read-consistency"}},
		{"two data centres, the defaults", twoDCs, gocql.LocalQuorum, gocql.LocalQuorum, gocql.EachQuorum, nil},
		{"two data centres, ALL", twoDCs, gocql.LocalQuorum, gocql.All, gocql.All, nil},
		{"two data centres, LOCAL_ONE reads", twoDCs, gocql.LocalOne, gocql.LocalQuorum, 0, []string{"--cql-read-consistency LOCAL_ONE", "LOCAL_QUORUM"}},
		{"two data centres, QUORUM reads", twoDCs, gocql.Quorum, gocql.LocalQuorum, gocql.EachQuorum, nil},
		{"two data centres, ONE reads", twoDCs, gocql.One, gocql.LocalQuorum, 0, []string{"--cql-read-consistency ONE"}},
		{"EACH_QUORUM reads", simple("3"), gocql.EachQuorum, gocql.LocalQuorum, 0, []string{"not a level reads may use"}},
		{"a strategy it does not know", map[string]string{"class": "EverywhereStrategy"}, gocql.One, gocql.One, gocql.One, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := feedWriteLevel(tc.repl, tc.read, tc.write)
			if tc.want == 0 {
				if !errors.Is(err, errkind.Invalid) {
					t.Fatalf("%v, %v: want refused", got, err)
				}
				for _, f := range tc.flags {
					if !strings.Contains(err.Error(), f) {
						t.Errorf("%v: does not name %q", err, f)
					}
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("%v, %v; want %v", got, err, tc.want)
			}
		})
	}
}
