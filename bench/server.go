package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server is a process the benchmark starts and measures: a listgate
// gateway, or a peer it is compared with.
type server struct {
	cmd  *exec.Cmd
	base string
	http *http.Client
}

var servingRE = regexp.MustCompile(`serving (http://\S+)`)

// startGateway runs a built listgate binary with args on a free loopback
// port.
func startGateway(bin string, concurrency int, args ...string) (*server, error) {
	return startServer(bin, concurrency, append([]string{"--listen", "127.0.0.1:0", "--log-level", "warn"}, args...)...)
}

// startServer runs bin with args, which make it listen on a free loopback
// port and print "serving http://…" as its first line on stdout (a
// gateway does with text logs, the default but in prod mode).
func startServer(bin string, concurrency int, args ...string) (*server, error) {
	// The benchmark measures what one client can get: no per-caller cost
	// budget, and the whole of every pool, the in-flight slots and
	// complexity, the WebSockets and the catch-up bytes (set by the
	// environment, which a gateway older than the flags ignores); else 32
	// counts at once are refused their share.
	return startServerEnv(bin, concurrency, []string{"LISTGATE_CALLER_COST_RATE=0", "LISTGATE_CALLER_MAX_IN_FLIGHT_SHARE=1",
		"LISTGATE_CALLER_MAX_WEBSOCKETS_SHARE=1", "LISTGATE_CALLER_CATCH_UP_BYTES_SHARE=1"}, args...)
}

// startServerEnv is startServer with env added to the process's
// environment in place of the benchmark's lifted budgets.
func startServerEnv(bin string, concurrency int, env []string, args ...string) (*server, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	m := servingRE.FindStringSubmatch(line)
	if err != nil || m == nil {
		cmd.Process.Kill()
		return nil, fmt.Errorf("%s did not start: %q %v", bin, line, err)
	}
	go io.Copy(io.Discard, out)
	// Room for the 100 requests the fan-out and batch comparisons send at
	// once, so that none of them opens a connection.
	idle := max(concurrency*2, 128)
	t := &http.Transport{MaxIdleConns: idle, MaxIdleConnsPerHost: idle, IdleConnTimeout: time.Minute}
	return &server{cmd: cmd, base: m[1], http: &http.Client{Transport: t, Timeout: 30 * time.Second}}, nil
}

func (g *server) stop() {
	g.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { g.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		g.cmd.Process.Kill()
	}
}

// post sends one GraphQL request and returns its body; a response with
// errors is an error.
func (g *server) post(ctx context.Context, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.base+"/graphql", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	b, err := g.do(req)
	if err == nil && strings.Contains(string(b), `"errors"`) {
		return b, fmt.Errorf("GraphQL errors: %.300s", b)
	}
	return b, err
}

// postTo sends a JSON body to path and returns the body.
func (g *server) postTo(ctx context.Context, path string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return g.do(req)
}

// get sends a GET request for path and returns the body.
func (g *server) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.base+path, nil)
	if err != nil {
		return nil, err
	}
	return g.do(req)
}

// do sends req and returns the body; a status other than 200 is an error.
func (g *server) do(req *http.Request) ([]byte, error) {
	resp, err := g.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, b)
	}
	return b, nil
}

// postAll sends the requests at once and returns the first error.
func (g *server) postAll(ctx context.Context, bodies [][]byte) error {
	return atOnce(bodies, func(body []byte) error {
		_, err := g.post(ctx, body)
		return err
	})
}

// atOnce calls f with each of args, all at once, and returns the first
// error.
func atOnce[T any](args []T, f func(T) error) error {
	errs := make(chan error, len(args))
	var wg sync.WaitGroup
	for _, a := range args {
		wg.Go(func() {
			if err := f(a); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at ") ".
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // clock ticks; 100 per second on Linux
}

// metric sums the values of a Prometheus series (with a label filter) in
// a gateway's /metrics.
func (g *server) metric(name, labelFilter string) (float64, error) {
	resp, err := g.http.Get(g.base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || !strings.Contains(line, labelFilter) {
			continue
		}
		if rest := line[len(name):]; rest != "" && rest[0] != '{' && rest[0] != ' ' {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum, sc.Err()
}
