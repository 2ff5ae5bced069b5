// Package cqlnode runs Cassandra nodes through the project's
// scripts/cassandra, for tests (through cqltest) and the nemesis: start,
// stop, kill, a node's pid and its clock offset, each returning an error
// rather than ending a test. It decides nothing about what a node should
// do, and never stops a node it was not given.
package cqlnode

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"
)

// Node is one node that scripts/cassandra runs on its own loopback
// address, its data kept across restarts until Reset.
type Node struct {
	Addr    string   // the address it listens on, 127.0.0.2 say
	Program string   // scripts/cassandra, by its path
	Env     []string // CASSANDRA_* and LISTGATE_RUN settings, after the process's own
}

// Script is scripts/cassandra under the repository root.
func Script(root string) string { return filepath.Join(root, "scripts", "cassandra") }

// RepoRoot is the folder holding go.mod at or above dir.
func RepoRoot(dir string) (string, error) {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above " + dir)
		}
		dir = parent
	}
}

// Port is the node's CQL port.
func (n *Node) Port() int {
	port := 9042
	for _, e := range n.Env {
		if v, ok := strings.CutPrefix(e, "CASSANDRA_PORT="); ok {
			if p, err := strconv.Atoi(v); err == nil {
				port = p
			}
		}
	}
	return port
}

// Host is the node's CQL address, host:port.
func (n *Node) Host() string { return net.JoinHostPort(n.Addr, strconv.Itoa(n.Port())) }

// Run runs scripts/cassandra cmd on the node and returns what it printed.
// It is safe from any goroutine.
func (n *Node) Run(cmd string) ([]byte, error) {
	c := exec.Command(n.Program, cmd, n.Addr)
	c.Env = append(os.Environ(), n.Env...)
	out, err := c.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("scripts/cassandra %s %s: %w\n%s", cmd, n.Addr, err, out)
	}
	return out, nil
}

// Start starts the node (again) and returns once CQL answers.
func (n *Node) Start() error { _, err := n.Run("start"); return err }

// Stop stops the node (SIGTERM); its data stays.
func (n *Node) Stop() error { _, err := n.Run("stop"); return err }

// Kill kills the node at once (SIGKILL), as a crash would.
func (n *Node) Kill() error { _, err := n.Run("kill"); return err }

// Reset deletes the data of the stopped node.
func (n *Node) Reset() error { _, err := n.Run("reset"); return err }

// PID is the process id of the running node.
func (n *Node) PID() (int, error) {
	out, err := n.Run("pid")
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return 0, fmt.Errorf("scripts/cassandra pid %s: %q", n.Addr, out)
	}
	return pid, nil
}

// Session connects to the node alone, at consistency ONE: what it reads
// is this node's. Its writes are timed by the node, not by gocql's
// default of the client's clock. The caller closes it.
func (n *Node) Session() (*gocql.Session, error) {
	c := gocql.NewCluster(n.Addr)
	c.Port = n.Port()
	c.HostFilter = gocql.WhiteListHostFilter(n.Addr)
	c.DisableInitialHostLookup = true // its peers may be reached at other addresses
	c.DefaultTimestamp = false
	c.Consistency = gocql.One
	c.Timeout, c.ConnectTimeout = 10*time.Second, 10*time.Second // nodes on a busy 2-core machine
	s, err := c.CreateSession()
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", n.Host(), err)
	}
	return s, nil
}

// AwaitPeers waits, up to within, until the node lists want peers that
// gossip says are up: a seed that started before another hears of it by
// gossip, a second or so later.
func (n *Node) AwaitPeers(want int, within time.Duration) error {
	s, err := n.Session()
	if err != nil {
		return err
	}
	defer s.Close()
	var peers int
	for deadline := time.Now().Add(within); ; time.Sleep(200 * time.Millisecond) {
		it := s.Query(`SELECT peer FROM system.peers`).Iter()
		peers = it.NumRows()
		err = it.Close()
		if err == nil && peers == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s lists %d peers, not %d, after %v (%v)", n.Addr, peers, want, within, err)
		}
	}
}

// WriteClockOffset sets the clock offset of a node started with
// CASSANDRA_CLOCK_OFFSET_FILE=file, in whole milliseconds; a running node
// follows within 50 ms. A new file is renamed over the old: the node
// never reads half of one.
func WriteClockOffset(file string, d time.Duration) error {
	f, err := os.CreateTemp(filepath.Dir(file), ".offset-*")
	if err != nil {
		return fmt.Errorf("setting the clock offset in %s: %w", file, err)
	}
	_, err = fmt.Fprintf(f, "%d\n", d.Milliseconds())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), file)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("setting the clock offset in %s: %w", file, err)
	}
	return nil
}
