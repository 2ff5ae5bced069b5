package gatewaytest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Build builds the listgate command from the repository at root into bin,
// as `go build` does: what runs is the product, not a test binary built
// with the race detector.
func Build(root, bin string) error {
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// CleanEnv is this process's environment without what would configure a
// gateway: LISTGATE_*, OTEL_*, GOGC and GOMEMLIMIT.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LISTGATE_") && !strings.HasPrefix(kv, "OTEL_") &&
			!strings.HasPrefix(kv, "GOGC=") && !strings.HasPrefix(kv, "GOMEMLIMIT=") {
			env = append(env, kv)
		}
	}
	return env
}

// Process is a listgate command started by Start: a gateway that serves.
type Process struct {
	Cmd    *exec.Cmd
	Base   string        // the URL it serves, http://127.0.0.1:port
	Exited chan struct{} // closed once it has exited
	// ExitErr is what waiting for it returned; read it once Exited is
	// closed.
	ExitErr error
}

// Start runs bin with args and returns once it says where it serves. Its
// environment is CleanEnv's, then a free loopback port, warnings and
// errors only, in text (the address is read from the text line on its
// standard output), then env, whose later entries win. Its standard error
// goes to stderr. A process that exits first, or does not serve within,
// is an error (and is killed).
func Start(bin string, args, env []string, stderr io.Writer, within time.Duration) (*Process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(CleanEnv(),
		"LISTGATE_LISTEN=127.0.0.1:0",
		"LISTGATE_LOG_LEVEL=warn",  // no line per request: some runs send thousands
		"LISTGATE_LOG_FORMAT=text", // in prod mode too
	)
	cmd.Env = append(cmd.Env, env...)
	out := NewAddrWriter()
	cmd.Stdout = out
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, Exited: make(chan struct{})}
	go func() {
		p.ExitErr = cmd.Wait()
		close(p.Exited)
	}()
	select {
	case p.Base = <-out.Addr():
		return p, nil
	case <-p.Exited:
		return p, fmt.Errorf("the gateway exited before serving: %v", p.ExitErr)
	case <-time.After(within):
		p.Cmd.Process.Kill()
		<-p.Exited
		return p, fmt.Errorf("the gateway did not serve within %v", within)
	}
}

// Terminate sends SIGTERM and waits up to within for the process to exit.
// It returns how long it took, and an error if it is still running (then
// it is left running) or exited other than with 0.
func (p *Process) Terminate(within time.Duration) (time.Duration, error) {
	sent := time.Now()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, err
	}
	select {
	case <-p.Exited:
	case <-time.After(within):
		return time.Since(sent), fmt.Errorf("the gateway (pid %d) still ran %v after SIGTERM", p.Cmd.Process.Pid, within)
	}
	took := time.Since(sent)
	if p.ExitErr != nil {
		return took, fmt.Errorf("after SIGTERM the gateway (pid %d) exited with %v after %v; want exit code 0", p.Cmd.Process.Pid, p.ExitErr, took.Round(time.Millisecond))
	}
	return took, nil
}

// Kill kills the process at once (SIGKILL) and waits for it to exit.
func (p *Process) Kill() {
	p.Cmd.Process.Kill()
	<-p.Exited
}
