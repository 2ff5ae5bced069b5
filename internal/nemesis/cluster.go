package nemesis

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/listgate/listgate/internal/cqlnode"
	"github.com/listgate/listgate/internal/gatewaytest"
)

// Addresses and ports of the run's own, apart from every test's nodes
// (127.0.0.1-.6, CQL 9042-9044, storage 7000-7002, JMX 7200-7306) and
// from each other: the nodes listen on .21-.23, their proxies on .31-.33.
const (
	cqlPort     = 9039
	storagePort = 7039
	jmxPort     = 7390 // + the node's number
	clusterName = "listgate-nemesis"
	keyspace    = "nemesis"
)

func nodeAddr(i int) string  { return fmt.Sprintf("127.0.0.%d", 21+i) }
func proxyAddr(i int) string { return fmt.Sprintf("127.0.0.%d", 31+i) }
func nodeName(i int) string  { return fmt.Sprintf("n%d", i+1) }
func gatewayName(i int) string {
	return fmt.Sprintf("g%d", i+1)
}

// Node is one of the cluster's three nodes.
type Node struct {
	Name  string
	node  cqlnode.Node
	clock string // its clock offset file
	logs  string // its system.log of every start, kept here (scripts/cassandra starts each anew)
	dir   string // its files (scripts/cassandra's node_dir)
	net   *Network

	mu     sync.Mutex
	pid    int  // 0 while it is down
	frozen bool // SIGSTOP sent, SIGCONT not yet
}

// Cluster is three Cassandra nodes, replication factor 3, each behind its
// proxy on the Network.
type Cluster struct {
	Nodes []*Node
	Net   *Network
}

// startCluster starts the three nodes at once, every one a seed (a fresh
// cluster: none waits to bootstrap), each reached by the others and by
// clients through its proxy, and returns once each lists the others.
func startCluster(root, dir string, heap string, log io.Writer) (*Cluster, error) {
	c := &Cluster{Net: NewNetwork()}
	var seeds []string
	for i := range 3 {
		seeds = append(seeds, net.JoinHostPort(proxyAddr(i), strconv.Itoa(storagePort)))
	}
	for i := range 3 {
		n := &Node{Name: nodeName(i), clock: filepath.Join(dir, nodeName(i)+".clock"), net: c.Net,
			logs: filepath.Join(dir, nodeName(i)+".system.log"),
			dir:  filepath.Join(dir, "cassandra", fmt.Sprintf("%s-%d", nodeAddr(i), cqlPort))}
		n.node = cqlnode.Node{Addr: nodeAddr(i), Program: cqlnode.Script(root), Env: []string{
			"LISTGATE_RUN=" + dir,
			"CASSANDRA_CLUSTER=" + clusterName,
			"CASSANDRA_PORT=" + strconv.Itoa(cqlPort),
			"CASSANDRA_STORAGE_PORT=" + strconv.Itoa(storagePort),
			"CASSANDRA_JMX_PORT=" + strconv.Itoa(jmxPort+i+1),
			"CASSANDRA_SEEDS=" + strings.Join(seeds, ","),
			"CASSANDRA_BROADCAST_ADDRESS=" + proxyAddr(i),
			"CASSANDRA_UNSAFE_SYSTEM=false", // the schema must survive a kill
			"CASSANDRA_CLOCK_OFFSET_FILE=" + n.clock,
			"CASSANDRA_HEAP=" + heap,
			"CASSANDRA_START_TIMEOUT=240",
		}}
		if err := cqlnode.WriteClockOffset(n.clock, 0); err != nil {
			return c, err
		}
		// A node left by an earlier run that was itself killed.
		if _, err := n.node.Run("kill"); err != nil {
			return c, err
		}
		if err := n.node.Reset(); err != nil {
			return c, err
		}
		for _, port := range []int{storagePort, cqlPort} {
			p := strconv.Itoa(port)
			if err := c.Net.Proxy(n.Name, net.JoinHostPort(proxyAddr(i), p), net.JoinHostPort(nodeAddr(i), p)); err != nil {
				return c, fmt.Errorf("the proxy of %s: %w", n.Name, err)
			}
		}
		c.Nodes = append(c.Nodes, n)
	}
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Go(func() { errs[i] = n.Start() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return c, err
	}
	for _, n := range c.Nodes {
		if err := n.node.AwaitPeers(2, 2*time.Minute); err != nil {
			return c, err
		}
	}
	fmt.Fprintf(log, "cluster %s: nodes %s, %s, %s reached through %s, %s, %s (CQL %d, storage %d)\n", clusterName,
		nodeAddr(0), nodeAddr(1), nodeAddr(2), proxyAddr(0), proxyAddr(1), proxyAddr(2), cqlPort, storagePort)
	return c, nil
}

// Hosts are the CQL addresses gateways are given: the proxies'.
func (c *Cluster) Hosts() []string {
	var h []string
	for i := range c.Nodes {
		h = append(h, net.JoinHostPort(proxyAddr(i), strconv.Itoa(cqlPort)))
	}
	return h
}

// Start starts the node (again) and returns once CQL answers.
func (n *Node) Start() error {
	n.keepLog()
	if err := n.node.Start(); err != nil {
		return err
	}
	pid, err := n.node.PID()
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.pid = pid
	n.mu.Unlock()
	n.net.SetOwner(pid, n.Name)
	return nil
}

// Kill kills the node at once (SIGKILL).
func (n *Node) Kill() error {
	n.mu.Lock()
	pid := n.pid
	n.pid, n.frozen = 0, false
	n.mu.Unlock()
	err := n.node.Kill()
	n.net.ForgetOwner(pid)
	return err
}

// signal sends sig to the running node.
func (n *Node) signal(sig syscall.Signal, frozen bool) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.pid == 0 {
		return fmt.Errorf("%s is not running", n.Name)
	}
	n.frozen = frozen
	return syscall.Kill(n.pid, sig)
}

// Freeze stops the node's process (SIGSTOP); Thaw lets it go on.
func (n *Node) Freeze() error { return n.signal(syscall.SIGSTOP, true) }
func (n *Node) Thaw() error   { return n.signal(syscall.SIGCONT, false) }

// SetClock sets how far the node's clock runs from the machine's.
func (n *Node) SetClock(d time.Duration) error { return cqlnode.WriteClockOffset(n.clock, d) }

// Answers says whether the node answers CQL, asked directly.
func (n *Node) Answers() bool {
	s, err := n.node.Session()
	if err != nil {
		return false
	}
	defer s.Close()
	var v string
	return s.Query("SELECT release_version FROM system.local").Scan(&v) == nil
}

// Stop ends the node for good: thawed if frozen, then killed, its data
// deleted unless keep.
func (n *Node) Stop(keep bool) error {
	n.mu.Lock()
	if n.frozen && n.pid != 0 {
		syscall.Kill(n.pid, syscall.SIGCONT)
		n.frozen = false
	}
	n.mu.Unlock()
	err := n.Kill()
	n.keepLog()
	if !keep {
		err = errors.Join(err, n.node.Reset())
	}
	return err
}

// keepLog appends the node's system.log, of its last start, to n.logs.
func (n *Node) keepLog() {
	b, err := os.ReadFile(filepath.Join(n.dir, "logs", "system.log"))
	if err != nil {
		return
	}
	f, err := os.OpenFile(n.logs, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "--- %s system.log until %s\n", n.Name, time.Now().Format(time.RFC3339Nano))
	f.Write(b)
}

// Close stops every node and the network.
func (c *Cluster) Close(keep bool) error {
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, n.Stop(keep))
	}
	return errors.Join(append(errs, c.Net.Close())...)
}

// Gateway is one listgate process of the run, started again after a kill
// under the same name (on another port).
type Gateway struct {
	Name    string
	bin     string
	env     []string
	logPath string
	net     *Network

	mu   sync.Mutex
	proc *gatewaytest.Process // nil while it is down
	base string
	log  *os.File
}

// migrate runs `listgate migrate` against the cluster: the keyspace with
// replication factor 3 and the tables. A fresh cluster on a loaded
// machine may not agree on the schema in time: it is tried three times.
func migrate(bin string, hosts []string, log io.Writer) error {
	var err error
	for range 3 {
		cmd := exec.Command(bin, "migrate")
		cmd.Env = append(gatewaytest.CleanEnv(), "LISTGATE_CQL_HOSTS="+strings.Join(hosts, ","), "LISTGATE_CQL_KEYSPACE="+keyspace,
			"LISTGATE_CQL_REPLICATION={'class': 'SimpleStrategy', 'replication_factor': 3}", "LISTGATE_CQL_TIMEOUT=10s")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.MultiWriter(log, &out), io.MultiWriter(log, &out)
		if err = cmd.Run(); err == nil {
			return nil
		}
		err = fmt.Errorf("listgate migrate: %w: %s", err, bytes.TrimSpace(out.Bytes()))
		fmt.Fprintln(log, err)
		time.Sleep(5 * time.Second)
	}
	return err
}

// newGateway prepares a gateway; Start starts it.
func newGateway(i int, bin, dir string, hosts []string, requestTimeout time.Duration, n *Network) *Gateway {
	name := gatewayName(i)
	return &Gateway{Name: name, bin: bin, net: n, logPath: filepath.Join(dir, name+".log"), env: []string{
		"LISTGATE_CQL_HOSTS=" + strings.Join(hosts, ","),
		"LISTGATE_CQL_KEYSPACE=" + keyspace,
		"LISTGATE_DATA_DIR=" + filepath.Join(dir, name),
		"LISTGATE_REQUEST_TIMEOUT=" + requestTimeout.String(),
	}}
}

// Start starts the gateway (again) and returns once it serves.
func (g *Gateway) Start() error {
	g.mu.Lock()
	if g.log == nil {
		f, err := os.OpenFile(g.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			g.mu.Unlock()
			return err
		}
		g.log = f
	}
	log := g.log
	g.mu.Unlock()
	fmt.Fprintf(log, "--- started %s\n", time.Now().Format(time.RFC3339Nano))
	p, err := gatewaytest.Start(g.bin, nil, g.env, log, time.Minute)
	if err != nil {
		return fmt.Errorf("%s: %w", g.Name, err)
	}
	g.net.SetOwner(p.Cmd.Process.Pid, g.Name)
	g.mu.Lock()
	g.proc, g.base = p, p.Base
	g.mu.Unlock()
	return nil
}

// Base is the URL the gateway serves, "" while it is down.
func (g *Gateway) Base() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.base
}

// Kill kills the gateway at once (SIGKILL).
func (g *Gateway) Kill() {
	g.mu.Lock()
	p := g.proc
	g.proc, g.base = nil, ""
	g.mu.Unlock()
	if p != nil {
		p.Kill()
		g.net.ForgetOwner(p.Cmd.Process.Pid)
	}
}

// Terminate sends SIGTERM and waits up to within for the gateway to exit
// 0, returning how long it took.
func (g *Gateway) Terminate(within time.Duration) (time.Duration, error) {
	g.mu.Lock()
	p := g.proc
	g.proc, g.base = nil, ""
	g.mu.Unlock()
	if p == nil {
		return 0, fmt.Errorf("%s is not running", g.Name)
	}
	took, err := p.Terminate(within)
	if err != nil {
		p.Kill()
	}
	g.net.ForgetOwner(p.Cmd.Process.Pid)
	return took, err
}

// Close kills the gateway if it runs, and closes its log.
func (g *Gateway) Close() {
	g.Kill()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.log != nil {
		g.log.Close()
		g.log = nil
	}
}
