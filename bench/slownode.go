package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/listgate/listgate/store"
	"github.com/listgate/listgate/store/cql"
)

// A slow node: three Cassandra nodes of the benchmark's own (RF 3), one
// gateway, 10-item reads one at a time, while the cluster is healthy,
// while one node is frozen (SIGSTOP) 4 s out of every 6, and while what
// the gateway sends that node arrives 200 ms late (a proxy in front of
// it), each with speculative reads on and off.

// slowNodeResult is one scenario with speculative reads on or off.
type slowNodeResult struct {
	Scenario    string  `json:"scenario"`
	Speculative bool    `json:"speculative_reads"`
	Reads       int     `json:"reads"`
	Errors      int     `json:"errors"`
	P50Ms       float64 `json:"p50_ms"`
	P99Ms       float64 `json:"p99_ms"`
	MaxMs       float64 `json:"max_ms"`
	Sent        float64 `json:"speculative_executions"`
	ExtraRatio  float64 `json:"extra_reads_ratio"`
	DelayMs     float64 `json:"speculative_delay_ms"`
	Seconds     float64 `json:"measured_seconds"`
}

const (
	slowNodePort     = 9046
	slowNodeStorage  = 7004
	slowNodeLists    = 200
	slowNodeFreeze   = 4 * time.Second
	slowNodeCycle    = 6 * time.Second
	slowNodeLinkWait = 200 * time.Millisecond
)

// The nodes: 127.0.0.10 to .12, apart from the tests' (.1 to .9); the
// last serves CQL on .13 behind a proxy on its own address.
var slowNodeAddrs = []string{"127.0.0.10", "127.0.0.11", "127.0.0.12"}

const slowNodeRPC = "127.0.0.13"

// benchNode is a node scripts/cassandra runs for the benchmark.
type benchNode struct {
	addr string
	env  []string
}

func (n benchNode) script(cmd string) (string, error) {
	c := exec.Command(filepath.Join("scripts", "cassandra"), cmd, n.addr)
	c.Env = append(os.Environ(), n.env...)
	out, err := c.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("scripts/cassandra %s %s: %w\n%s", cmd, n.addr, err, out)
	}
	return string(out), nil
}

func (n benchNode) pid() (int, error) {
	out, err := n.script("pid")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

// startSlowNodeCluster starts the three nodes at once, every one a seed,
// the last behind proxy, and returns a function that kills and deletes
// them.
func startSlowNodeCluster() ([]benchNode, func(), error) {
	var seeds []string
	for _, a := range slowNodeAddrs {
		seeds = append(seeds, fmt.Sprintf("%s:%d", a, slowNodeStorage))
	}
	var nodes []benchNode
	for i, a := range slowNodeAddrs {
		env := []string{"CASSANDRA_CLUSTER=listgate-bench-slownode", fmt.Sprint("CASSANDRA_PORT=", slowNodePort),
			fmt.Sprint("CASSANDRA_STORAGE_PORT=", slowNodeStorage), fmt.Sprint("CASSANDRA_JMX_PORT=", 7310+i),
			"CASSANDRA_SEEDS=" + strings.Join(seeds, ",")}
		if i == len(slowNodeAddrs)-1 {
			env = append(env, "CASSANDRA_RPC_ADDRESS="+slowNodeRPC)
		}
		nodes = append(nodes, benchNode{addr: a, env: env})
	}
	stop := func() {
		for _, n := range nodes {
			if pid, err := n.pid(); err == nil {
				syscall.Kill(pid, syscall.SIGCONT)
			}
			n.script("kill")
			n.script("reset")
		}
	}
	for _, n := range nodes {
		n.script("kill")
		n.script("reset")
	}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { _, errs[i] = n.script("start") })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			stop()
			return nil, nil, err
		}
	}
	return nodes, stop, nil
}

// slowNode runs the scenarios.
func slowNode(ctx context.Context, c config, bin string) ([]slowNodeResult, error) {
	log := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	log("a slow node: starting three nodes on %s (CQL %d)", strings.Join(slowNodeAddrs, ", "), slowNodePort)
	nodes, stop, err := startSlowNodeCluster()
	if err != nil {
		return nil, err
	}
	defer stop()
	proxy, err := startDelayProxy(net.JoinHostPort(slowNodeAddrs[2], strconv.Itoa(slowNodePort)), net.JoinHostPort(slowNodeRPC, strconv.Itoa(slowNodePort)))
	if err != nil {
		return nil, err
	}
	defer proxy.close()
	var hosts []string
	for _, a := range slowNodeAddrs {
		hosts = append(hosts, net.JoinHostPort(a, strconv.Itoa(slowNodePort)))
	}
	const keyspace = "listgate_bench_slownode"
	if err := seedSlowNode(ctx, hosts, keyspace); err != nil {
		return nil, err
	}
	slow := nodes[2]
	measured := 3 * slowNodeCycle
	if c.quick {
		measured = slowNodeCycle
	}
	var out []slowNodeResult
	for _, scenario := range []string{"healthy", "frozen 4 s of every 6", "slow link: +200 ms"} {
		for _, speculative := range []bool{true, false} {
			log("  %s, speculative reads %v", scenario, speculative)
			r, err := slowNodeRun(ctx, bin, hosts, keyspace, scenario, speculative, measured, func(ctx context.Context) {
				switch {
				case strings.HasPrefix(scenario, "frozen"):
					freezeCycles(ctx, slow)
				case strings.HasPrefix(scenario, "slow"):
					proxy.setDelay(slowNodeLinkWait)
					<-ctx.Done()
					proxy.setDelay(0)
				}
			})
			if err != nil {
				return out, err
			}
			log("    %d reads, p50 %.1f ms, p99 %.1f ms, max %.0f ms, %.0f sent twice (%.2f %%), %d errors",
				r.Reads, r.P50Ms, r.P99Ms, r.MaxMs, r.Sent, 100*r.ExtraRatio, r.Errors)
			out = append(out, r)
		}
	}
	return out, nil
}

// freezeCycles freezes n 4 s out of every 6 until ctx ends, and leaves it
// running.
func freezeCycles(ctx context.Context, n benchNode) {
	pid, err := n.pid()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	defer syscall.Kill(pid, syscall.SIGCONT)
	for {
		syscall.Kill(pid, syscall.SIGSTOP)
		select {
		case <-ctx.Done():
			return
		case <-time.After(slowNodeFreeze):
		}
		syscall.Kill(pid, syscall.SIGCONT)
		select {
		case <-ctx.Done():
			return
		case <-time.After(slowNodeCycle - slowNodeFreeze):
		}
	}
}

// seedSlowNode makes the keyspace, RF 3, and slowNodeLists lists of 10
// items, then reads them for 10 s, so that the first scenario does not
// find the nodes colder than the others do.
func seedSlowNode(ctx context.Context, hosts []string, keyspace string) error {
	cfg := cql.DefaultConfig()
	cfg.Hosts, cfg.Keyspace = hosts, keyspace
	cfg.Timeout = 10 * time.Second
	s, err := cql.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	schema := cql.DefaultSchema()
	schema.Replication = "{'class': 'SimpleStrategy', 'replication_factor': 3}"
	if err := s.Migrate(ctx, schema); err != nil {
		return err
	}
	f, err := s.CreateFeature(ctx, store.Feature{EntityType: "user", Name: featureName, ValueType: store.String, TTL: 7 * 24 * time.Hour})
	if err != nil {
		return err
	}
	for i := range slowNodeLists {
		items := make([]store.NewItem, 10)
		for j := range items {
			items[j] = store.NewItem{Timestamp: time.Now().UnixNano(), Value: value(j)}
		}
		if _, err := s.AddItems(ctx, store.List{Feature: &f, EntityID: fmt.Sprint("s", i)}, items); err != nil {
			return err
		}
	}
	for i, end := 0, time.Now().Add(10*time.Second); time.Now().Before(end); i++ {
		if _, err := s.Items(ctx, store.List{Feature: &f, EntityID: fmt.Sprint("s", i%slowNodeLists)}, store.Range{Limit: 10}); err != nil {
			return err
		}
	}
	return nil
}

// slowNodeRun starts a gateway, warms it up, and reads for measured while
// fault runs.
func slowNodeRun(ctx context.Context, bin string, hosts []string, keyspace, scenario string, speculative bool, measured time.Duration, fault func(context.Context)) (slowNodeResult, error) {
	r := slowNodeResult{Scenario: scenario, Speculative: speculative}
	g, err := startGateway(bin, 1, "--cql-hosts", strings.Join(hosts, ","), "--cql-keyspace", keyspace,
		"--cql-speculative-reads="+strconv.FormatBool(speculative))
	if err != nil {
		return r, err
	}
	defer g.stop()
	query := `query Read($id: ID!) { listItems(entityType: "user", entityId: $id, feature: "` + featureName + `", limit: 10) { items { value } } }`
	bodies := make([][]byte, slowNodeLists)
	for i := range bodies {
		bodies[i], _ = json.Marshal(map[string]any{"query": query, "variables": map[string]any{"id": fmt.Sprint("s", i)}})
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	read := func() (time.Duration, error) {
		began := time.Now()
		_, err := g.post(ctx, bodies[rnd.IntN(len(bodies))])
		return time.Since(began), err
	}
	// Warm up: every node prepares the read, and the delay is measured.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		read()
	}
	before, err := g.metric("listgate_cql_speculative_executions_total", "")
	if err != nil {
		return r, err
	}
	fctx, cancel := context.WithCancel(ctx)
	faulted := make(chan struct{})
	go func() { defer close(faulted); fault(fctx) }()
	began := time.Now()
	var took []time.Duration
	for time.Since(began) < measured {
		d, err := read()
		if err != nil {
			r.Errors++
		}
		took = append(took, d)
	}
	r.Seconds = time.Since(began).Seconds()
	cancel()
	<-faulted
	after, err := g.metric("listgate_cql_speculative_executions_total", "")
	if err != nil {
		return r, err
	}
	delay, _ := g.metric("listgate_cql_speculative_delay_seconds", "")
	slices.Sort(took)
	r.Reads = len(took)
	r.P50Ms, r.P99Ms, r.MaxMs = ms(took[len(took)/2]), ms(took[len(took)*99/100]), ms(took[len(took)-1])
	r.Sent = after - before
	r.ExtraRatio = r.Sent / float64(r.Reads)
	r.DelayMs = delay * 1000
	return r, nil
}

// delayProxy forwards TCP connections to a target, holding what the
// client sends for the delay set when it arrived (none at first); what
// the target sends back passes at once.
type delayProxy struct {
	ln     net.Listener
	target string
	delay  atomic.Int64 // ns

	mu    sync.Mutex
	conns []net.Conn
}

func startDelayProxy(listen, target string) (*delayProxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &delayProxy{ln: ln, target: target}
	go p.serve()
	return p, nil
}

func (p *delayProxy) setDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *delayProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *delayProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.forward(c)
	}
}

func (p *delayProxy) forward(client net.Conn) {
	node, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, client, node)
	p.mu.Unlock()
	go func() {
		io.Copy(client, node)
		client.Close()
	}()
	type chunk struct {
		b   []byte
		due time.Time
	}
	chunks := make(chan chunk, 4096)
	go func() {
		defer close(chunks)
		for {
			b := make([]byte, 32<<10)
			n, err := client.Read(b)
			if n > 0 {
				chunks <- chunk{b[:n], time.Now().Add(time.Duration(p.delay.Load()))}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		time.Sleep(time.Until(c.due))
		if _, err := node.Write(c.b); err != nil {
			break
		}
	}
	node.Close()
	client.Close()
}
