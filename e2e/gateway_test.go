package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/listgate/listgate/endpoint"
	"github.com/listgate/listgate/internal/gatewaytest"
)

const (
	// answerMargin is how long past its request timeout an answer may come.
	answerMargin = 5 * time.Second
	// gatewayRSSKill: a gateway whose resident memory passes this is killed
	// at once, so that a test fails fast and spares the machine.
	gatewayRSSKill = 2 << 30
)

// binaryDir holds the gateway binary while the tests run.
var binaryDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binaryDir != "" {
		os.RemoveAll(binaryDir)
	}
	os.Exit(code)
}

// gatewayBinary builds the listgate command once (gatewaytest.Build), from
// the repository root: what runs, and the memory and CPU measured, must be
// the product's, not those of this test binary, which `make test` builds
// with the race detector (5–10 times the memory, several times the CPU).
var gatewayBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "listgate-e2e")
	if err != nil {
		return "", err
	}
	binaryDir = dir
	bin := filepath.Join(dir, "listgate")
	if err := gatewaytest.Build("..", bin); err != nil { // the repository root, above e2e/
		return "", err
	}
	return bin, nil
})

// gateway is a listgate process a test started.
type gateway struct {
	*gatewaytest.Process
	t       *testing.T
	base    string
	timeout time.Duration // its --request-timeout
	client  *http.Client  // times out answerMargin past timeout
	stderr  *lockedBuffer
	mem     *memWatch
}

// lockedBuffer keeps the gateway's log lines for tests that look for one.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startGateway runs the listgate command (gatewayBinary) and checks that
// /healthz answers. It listens on a free loopback port, keeps its data in
// a folder of the test's own, and logs warnings and errors only; env
// (LISTGATE_* settings, GOMEMLIMIT) comes after these defaults and wins.
// Nothing of the test's own environment's LISTGATE_*, OTEL_*, GOGC or
// GOMEMLIMIT reaches it (gatewaytest.Start). When the test ends the
// process is stopped (stop).
func startGateway(t *testing.T, env ...string) *gateway {
	t.Helper()
	return startGatewayCommand(t, builtBinary(t), nil, env...)
}

// startGatewayCommand is startGateway with a binary of the test's choosing
// (one taken out of the image, say) and its command-line args, which win
// over env.
func startGatewayCommand(t *testing.T, bin string, args []string, env ...string) *gateway {
	t.Helper()
	g := &gateway{t: t, timeout: endpoint.DefaultLimits.RequestTimeout, stderr: &lockedBuffer{}}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "LISTGATE_REQUEST_TIMEOUT="); ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				t.Fatal(err)
			}
			g.timeout = d
		}
	}
	p, err := gatewaytest.Start(bin, args, append([]string{"LISTGATE_DATA_DIR=" + t.TempDir()}, env...),
		io.MultiWriter(gatewaytest.Log{T: t}, g.stderr), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	g.Process, g.base = p, p.Base
	g.mem = watchMemory(p.Cmd.Process.Pid, p.Exited, func() { p.Cmd.Process.Kill() })
	t.Cleanup(func() {
		g.mem.stop()
		g.stop()
	})
	g.client = &http.Client{
		Timeout:   g.timeout + answerMargin,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
	}
	t.Cleanup(g.client.CloseIdleConnections)
	g.alive()
	return g
}

// cleanEnv is the test's environment without what would configure a
// gateway (gatewaytest.CleanEnv).
func cleanEnv() []string { return gatewaytest.CleanEnv() }

// stop ends a gateway still running when its test ends. After a test that
// passed it is sent SIGTERM and must exit 0, as it does in production;
// after one that failed it is killed at once.
func (g *gateway) stop() {
	select {
	case <-g.Exited:
		return // the test ended it
	default:
	}
	pid := g.Cmd.Process.Pid
	if !g.t.Failed() {
		g.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.Exited:
			if g.ExitErr != nil {
				g.t.Errorf("the gateway (pid %d) exited with %v on SIGTERM at the end of the test%s", pid, g.ExitErr, g.mem.note())
			}
			return
		case <-time.After(30 * time.Second):
			g.t.Errorf("the gateway (pid %d) still ran 30 s after SIGTERM at the end of the test: killing it", pid)
		}
	}
	g.Cmd.Process.Kill()
	select {
	case <-g.Exited:
	case <-time.After(10 * time.Second):
		g.t.Errorf("the gateway (pid %d) did not end 10 s after it was killed", pid)
	}
}

// alive fails the test now unless the process runs and /healthz answers.
func (g *gateway) alive() {
	g.t.Helper()
	select {
	case <-g.Exited:
		g.t.Fatalf("the gateway is gone: %v%s", g.ExitErr, g.mem.note())
	default:
	}
	c := &http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get(g.base + "/healthz")
	if err != nil {
		g.t.Fatalf("/healthz: %v%s", err, g.mem.note())
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		g.t.Fatalf("/healthz answered %d", resp.StatusCode)
	}
}

// do posts a GraphQL request with the gateway's client, bounded by its
// timeout. It is safe from any goroutine.
func (g *gateway) do(query string, vars map[string]any) gatewaytest.Answer {
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		return gatewaytest.Answer{Err: err}
	}
	return g.post(body)
}

// post posts a request body with the gateway's client.
func (g *gateway) post(body []byte) gatewaytest.Answer {
	return gatewaytest.Send(g.client, g.base, "", body)
}

// mustOK fails the test unless the request succeeds with data.
func (g *gateway) mustOK(query string, vars map[string]any) gatewaytest.Answer {
	g.t.Helper()
	r := g.do(query, vars)
	if p := r.Problem(); p != "" {
		g.t.Fatalf("%.200s\nanswered %s%s", query, p, g.mem.note())
	}
	return r
}

// memWatch samples a process's VmRSS every 50 ms, and kills it past
// gatewayRSSKill.
type memWatch struct {
	mu      sync.Mutex
	max     int64
	samples int
	killed  int64 // the RSS it was killed at; 0 if it was not
	done    chan struct{}
	once    sync.Once
}

func watchMemory(pid int, exited <-chan struct{}, kill func()) *memWatch {
	m := &memWatch{done: make(chan struct{})}
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for first := true; ; first = false {
			if !first {
				select {
				case <-m.done:
					return
				case <-exited:
					return
				case <-tick.C:
				}
			}
			rss, err := procStatus(pid, "VmRSS")
			if err != nil {
				continue // exiting
			}
			m.record(rss)
			if rss > gatewayRSSKill {
				m.mu.Lock()
				m.killed = rss
				m.mu.Unlock()
				kill()
				return
			}
		}
	}()
	return m
}

func (m *memWatch) stop() { m.once.Do(func() { close(m.done) }) }

func (m *memWatch) record(rss int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.max = max(m.max, rss)
	m.samples++
}

func (m *memWatch) peak() (int64, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.max, m.samples
}

// note says why the test killed the process, if it did.
func (m *memWatch) note() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.killed > 0 {
		return fmt.Sprintf(" (the test killed it: its RSS reached %d MiB, past %d MiB)", m.killed>>20, gatewayRSSKill>>20)
	}
	return ""
}

// procStatus reads a kB field of /proc/<pid>/status, in bytes.
func procStatus(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}
