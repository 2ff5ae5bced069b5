// Package cqltest connects tests to the real CQL server that the project's
// test command starts (scripts/test), or to any cluster named by
// LISTGATE_TEST_CQL_HOSTS, and starts nodes of a test's own through
// scripts/cassandra. When the server, Java or the script is missing,
// testenv decides whether the test fails or is skipped.
package cqltest

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqlnode"
	"github.com/listgate/listgate/internal/testenv"
	"github.com/listgate/listgate/store/cql"
)

// HostsEnv names the CQL hosts tests use, comma separated.
const HostsEnv = "LISTGATE_TEST_CQL_HOSTS"

var (
	mu       sync.Mutex
	keyspace string // this test process's own, migrated on first use
)

// Hosts returns the test cluster's hosts. When none is set, or the first
// does not answer, the test ends through testenv.Missing.
func Hosts(t testing.TB) []string {
	t.Helper()
	v := os.Getenv(HostsEnv)
	if v == "" {
		testenv.Missing(t, "no CQL server (%s=host:port is not set)", HostsEnv)
	}
	hosts := strings.Split(v, ",")
	addr := hosts[0]
	if _, _, err := net.SplitHostPort(addr); err != nil {
		addr = net.JoinHostPort(addr, "9042")
	}
	if c, err := net.DialTimeout("tcp", addr, 3*time.Second); err != nil {
		testenv.Missing(t, "no CQL server answers at %s (%s): %v", addr, HostsEnv, err)
	} else {
		c.Close()
	}
	return hosts
}

// Config returns a store configuration for the test cluster, on a keyspace
// of this test process's own, created and migrated on first use.
func Config(t testing.TB) cql.Config {
	t.Helper()
	cfg := cql.DefaultConfig()
	cfg.Hosts = Hosts(t)
	cfg.Timeout = 10 * time.Second // a test node on a busy 2-core machine
	mu.Lock()
	defer mu.Unlock()
	if keyspace != "" {
		cfg.Keyspace = keyspace
		return cfg
	}
	cfg.Keyspace = fmt.Sprintf("listgate_test_%d_%d", os.Getpid(), time.Now().Unix()%100000)
	if err := migrate(cfg); err != nil {
		t.Fatalf("setting up keyspace %s: %v", cfg.Keyspace, err)
	}
	keyspace = cfg.Keyspace
	return cfg
}

func migrate(cfg cql.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := cql.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Migrate(ctx, cql.DefaultSchema())
}

// Open opens a store on the test keyspace, closed when the test ends.
func Open(t testing.TB, cfg cql.Config) *cql.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := cql.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("opening the CQL store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Node is a Cassandra node of one test's own, which the test may stop and
// start: the project's scripts/cassandra runs it on its own loopback
// address (cqlnode), with its data kept across restarts.
type Node struct {
	t testing.TB
	cqlnode.Node
}

// StartNode starts a fresh node on addr (127.0.0.2, say) and stops and
// deletes it when the test ends. env adds CASSANDRA_* settings. Without
// Java or scripts/cassandra the test ends through testenv.Missing.
func StartNode(t testing.TB, addr string, env ...string) *Node {
	t.Helper()
	n := NewNode(t, addr, env...)
	n.Start()
	return n
}

// NewNode is StartNode without the start: a node that is not up until the
// test starts it.
func NewNode(t testing.TB, addr string, env ...string) *Node {
	t.Helper()
	testenv.Program(t, "java", "a JDK 17 on PATH, which scripts/cassandra runs Cassandra nodes with")
	program := testenv.Program(t, cqlnode.Script(repoRoot(t)), "the script that runs Cassandra nodes for tests")
	n := &Node{t: t, Node: cqlnode.Node{Addr: addr, Program: program, Env: append([]string{
		"CASSANDRA_CLUSTER=listgate-" + strings.ReplaceAll(addr, ".", "-"),
		"CASSANDRA_UNSAFE_SYSTEM=false",  // the schema must survive Kill
		"CASSANDRA_COMMITLOG_SYNC=batch", // and so must every acknowledged write
	}, env...)}}
	n.script("stop")
	n.script("reset")
	t.Cleanup(func() {
		n.script("kill")
		n.script("reset")
	})
	return n
}

// StartCluster starts three nodes of one cluster, on 127.0.0.1, .2 and .3,
// with ports of their own (CQL 9043, storage 7001), apart from the shared
// test node's.
func StartCluster(t testing.TB) []*Node {
	t.Helper()
	var nodes []*Node
	for i := 1; i <= 3; i++ {
		nodes = append(nodes, StartNode(t, fmt.Sprintf("127.0.0.%d", i),
			"CASSANDRA_CLUSTER=listgate-three", "CASSANDRA_PORT=9043", "CASSANDRA_STORAGE_PORT=7001",
			fmt.Sprintf("CASSANDRA_JMX_PORT=%d", 7300+i), "CASSANDRA_SEEDS=127.0.0.1:7001",
			"CASSANDRA_RING_DELAY_MS=10000")) // joining nodes gossip with the seed first

	}
	return nodes
}

// Start starts the node (again) and waits until CQL answers.
func (n *Node) Start() { n.t.Helper(); n.script("start") }

// Stop stops the node; its data stays.
func (n *Node) Stop() { n.t.Helper(); n.script("stop") }

// Kill kills the node at once, as a crash would; acknowledged writes stay.
func (n *Node) Kill() { n.t.Helper(); n.script("kill") }

// PID is the process id of the running node.
func (n *Node) PID() int {
	n.t.Helper()
	pid, err := n.Node.PID()
	if err != nil {
		n.t.Fatal(err)
	}
	return pid
}

func (n *Node) script(cmd string) []byte {
	n.t.Helper()
	out, err := n.Run(cmd)
	if err != nil {
		n.t.Fatal(err)
	}
	return out
}

func repoRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root, err := cqlnode.RepoRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	return root
}
