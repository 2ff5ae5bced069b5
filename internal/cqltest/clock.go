package cqltest

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gocql/gocql"

	"github.com/listgate/listgate/internal/cqlnode"
	"github.com/listgate/listgate/internal/testenv"
)

// ClockedNode is a node of a test's own whose clock runs apart from the
// machine's by an offset the test sets, and may step, while the node runs
// (scripts/cassandra's CASSANDRA_CLOCK_OFFSET_FILE): its write timestamps,
// now() and TTL expiry follow the offset; its timeouts do not.
type ClockedNode struct {
	*Node
	offsetFile string

	mu     sync.Mutex
	offset time.Duration // guarded by mu
}

// ClockedPort is the CQL port of StartClockedCluster's nodes.
const ClockedPort = 9044

// StartClockedCluster starts one cluster of a node per offset, two or
// three, on 127.0.0.4, .5 and .6, with ports of their own (CQL 9044,
// storage 7002, JMX 7304-7306) apart from StartCluster's and the shared
// test node's; node i's clock runs offsets[i] from the machine's from its
// start. Every node is a seed, so none waits to bootstrap (the cluster is
// fresh and empty); it returns once each lists the others as its peers.
// Without javac (which builds the nodes' clock) the test ends through
// testenv.Missing.
func StartClockedCluster(t testing.TB, offsets ...time.Duration) []*ClockedNode {
	t.Helper()
	return startClockedCluster(t, clockedPorts{ClockedPort, 7002, 7304}, offsets...)
}

// clockedPorts are one clocked cluster's ports: CQL, storage, and the
// first node's JMX. Nodes on the same addresses and ports share
// scripts/cassandra's folders: two clusters of them, in two test binaries
// that go test runs at once, would stop and reset each other's nodes.
type clockedPorts struct{ cql, storage, jmx int }

func startClockedCluster(t testing.TB, ports clockedPorts, offsets ...time.Duration) []*ClockedNode {
	t.Helper()
	if len(offsets) < 2 || len(offsets) > 3 {
		t.Fatalf("StartClockedCluster starts two or three nodes, not %d", len(offsets))
	}
	testenv.Program(t, "javac", "a JDK 17 on PATH, whose javac scripts/cassandra builds the nodes' clock with")
	dir := t.TempDir() // made before the nodes, so removed after they are killed
	var seeds []string
	for i := range offsets {
		seeds = append(seeds, fmt.Sprintf("127.0.0.%d:%d", 4+i, ports.storage))
	}
	var nodes []*ClockedNode
	for i, offset := range offsets {
		addr := fmt.Sprintf("127.0.0.%d", 4+i)
		n := &ClockedNode{offsetFile: filepath.Join(dir, addr+".offset")}
		n.Node = NewNode(t, addr,
			"CASSANDRA_CLUSTER=listgate-clocked", "CASSANDRA_PORT="+strconv.Itoa(ports.cql), "CASSANDRA_STORAGE_PORT="+strconv.Itoa(ports.storage),
			fmt.Sprintf("CASSANDRA_JMX_PORT=%d", ports.jmx+i), "CASSANDRA_SEEDS="+strings.Join(seeds, ","),
			"CASSANDRA_CLOCK_OFFSET_FILE="+n.offsetFile)
		n.SetClockOffset(offset)
		nodes = append(nodes, n)
	}
	// At once: a seed waits for no other, and much of a start is waiting.
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.Node.Node.Start() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		n.awaitPeers(len(nodes) - 1)
	}
	return nodes
}

// Session connects to the node alone, closed when the test ends: what it
// reads is this node's time. Its writes are timed by the node, not by
// gocql's default of the client's clock.
func (n *ClockedNode) Session(t testing.TB) *gocql.Session {
	t.Helper()
	s, err := n.Node.Session()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// awaitPeers waits until the node lists as many peers: a seed that started
// before another hears of it by gossip, a second or so later.
func (n *ClockedNode) awaitPeers(want int) {
	n.t.Helper()
	if err := n.AwaitPeers(want, time.Minute); err != nil {
		n.t.Fatal(err)
	}
}

// SetClockOffset sets how far the node's clock runs from the machine's, in
// whole milliseconds; a running node follows within 50 ms. Like a real
// clock set back, a smaller offset sends the node's clock back, but its write
// timestamps and time UUIDs never go back: they wait for it to catch up.
func (n *ClockedNode) SetClockOffset(d time.Duration) {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := cqlnode.WriteClockOffset(n.offsetFile, d); err != nil {
		n.t.Fatalf("setting the clock offset of %s: %v", n.Addr, err)
	}
	n.offset = d.Truncate(time.Millisecond)
}

// ClockOffset is the offset last set, to the millisecond.
func (n *ClockedNode) ClockOffset() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.offset
}
