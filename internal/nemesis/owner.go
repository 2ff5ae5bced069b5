package nemesis

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// On one machine every process reaches a loopback address from 127.0.0.1
// (Cassandra binds no address for its connections to other nodes), so the
// proxy cannot tell nodes and gateways apart by address. It asks the
// kernel instead: /proc/net/tcp names the socket at the other end of the
// connection by its inode, and /proc/<pid>/fd says which of the processes
// the run started holds it. Processes of the same user can read both.

// owner is who holds the client end of one proxied connection, looked up
// when first needed and again, at most every ownerRetry, until found: a
// process may connect before the run has learnt its pid.
type owner struct {
	net         *Network
	local, peer string // the proxy's end and the client's, host:port
	mu          sync.Mutex
	found       string
	inode       uint64
	tried       time.Time
}

const ownerRetry = 500 * time.Millisecond

func (n *Network) owner(c net.Conn) *owner {
	return &owner{net: n, local: c.LocalAddr().String(), peer: c.RemoteAddr().String()}
}

// name is the owner's name, or "" while it is not known.
func (o *owner) name() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.found != "" || time.Since(o.tried) < ownerRetry {
		return o.found
	}
	o.tried = time.Now()
	if o.inode == 0 {
		o.inode, _ = socketInode(o.peer, o.local)
	}
	if o.inode == 0 {
		return ""
	}
	o.net.mu.Lock()
	owners := make(map[int]string, len(o.net.owners))
	for pid, name := range o.net.owners {
		owners[pid] = name
	}
	o.net.mu.Unlock()
	want := fmt.Sprintf("socket:[%d]", o.inode)
	for pid, name := range owners {
		if holds(pid, want) {
			o.found = name
			break
		}
	}
	return o.found
}

// holds says whether process pid has a descriptor linking to target.
func holds(pid int, target string) bool {
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == target {
			return true
		}
	}
	return false
}

// socketInode finds in /proc/net/tcp the inode of the IPv4 socket whose
// local address is local and whose remote one is remote.
func socketInode(local, remote string) (uint64, error) {
	l, err := procAddr(local)
	if err != nil {
		return 0, err
	}
	r, err := procAddr(remote)
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		fields := strings.Fields(lines.Text())
		if len(fields) < 10 || fields[1] != l || fields[2] != r {
			continue
		}
		return strconv.ParseUint(fields[9], 10, 64)
	}
	return 0, lines.Err()
}

// procAddr writes an IPv4 host:port as /proc/net/tcp does: the address's
// four bytes as one little-endian word, then the port, both in hex.
func procAddr(hostport string) (string, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", err
	}
	ip := net.ParseIP(host).To4()
	if ip == nil {
		return "", fmt.Errorf("%s is not IPv4", host)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], p), nil
}
