package cqltest

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SlowNodePort is the CQL port of StartSlowNodeCluster's nodes.
const SlowNodePort = 9045

// StartSlowNodeCluster starts three nodes of one cluster on 127.0.0.7, .8
// and .9, with ports of their own (CQL 9045, storage 7003, JMX 7307-7309)
// apart from every other test's nodes, for a test that freezes one. Every
// node is a seed, so none waits to bootstrap (the cluster is fresh and
// empty), and all start at once; it returns once each lists the others as
// its peers.
func StartSlowNodeCluster(t testing.TB) []*Node {
	t.Helper()
	const storagePort = 7003
	var seeds []string
	for i := range 3 {
		seeds = append(seeds, fmt.Sprintf("127.0.0.%d:%d", 7+i, storagePort))
	}
	var nodes []*Node
	for i := range 3 {
		nodes = append(nodes, NewNode(t, fmt.Sprintf("127.0.0.%d", 7+i),
			"CASSANDRA_CLUSTER=listgate-slownode", "CASSANDRA_PORT="+strconv.Itoa(SlowNodePort),
			"CASSANDRA_STORAGE_PORT="+strconv.Itoa(storagePort), fmt.Sprintf("CASSANDRA_JMX_PORT=%d", 7307+i),
			"CASSANDRA_SEEDS="+strings.Join(seeds, ",")))
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.Node.Start() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		if err := n.AwaitPeers(len(nodes)-1, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// AwaitCQL waits until the node answers a query, for a minute at most.
func (n *Node) AwaitCQL() {
	n.t.Helper()
	s, err := n.Session()
	if err != nil {
		n.t.Fatal(err)
	}
	defer s.Close()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		var v string
		err := s.Query(`SELECT release_version FROM system.local`).Scan(&v)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("%s does not answer after a minute: %v", n.Addr, err)
		}
	}
}

// Freeze stops the node's process (SIGSTOP), as a GC pause or a frozen VM
// would: its sockets stay open and nothing answers. thaw (SIGCONT) lets it
// run again; the test's end does too.
func (n *Node) Freeze() (thaw func()) {
	n.t.Helper()
	pid := n.PID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		n.t.Fatalf("freezing %s (pid %d): %v", n.Addr, pid, err)
	}
	var once sync.Once
	thaw = func() { once.Do(func() { syscall.Kill(pid, syscall.SIGCONT) }) }
	n.t.Cleanup(thaw)
	return thaw
}
