package e2e

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/listgate/listgate/internal/cqlnode"
	"github.com/listgate/listgate/internal/gatewaytest"
	"github.com/listgate/listgate/internal/nemesis"
	"github.com/listgate/listgate/internal/testenv"
)

// nemesisSeed is the bounded run's seed; LISTGATE_NEMESIS_SEED draws
// another schedule, and LISTGATE_NEMESIS_DIR keeps the run's files
// (logs, history.jsonl) in a folder of its name.
const nemesisSeed = 39

// A bounded nemesis run (internal/nemesis; `make nemesis` runs the full
// one): three Cassandra nodes behind the run's proxies, three gateways,
// adds, reads, counts and resuming subscriptions, and 100 s of short
// faults of every kind but a node killed (TestClusterKeepsServingWithANodeDown
// kills one): nodes frozen, partitioned, slowed and their clocks stepped,
// gateways killed mid-add and cut from a quorum. Then no acknowledged add
// is lost or altered, no failed one is in part, no subscription missed or
// twice received an add, no request ran past its deadline, /readyz told
// the truth, and every gateway ended well on SIGTERM.
func TestClusterNemesis(t *testing.T) {
	testenv.Program(t, "java", "a JDK 17 on PATH, which scripts/cassandra runs Cassandra nodes with")
	testenv.Program(t, "javac", "a JDK 17 on PATH, whose javac scripts/cassandra builds the nodes' clock with")
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	testenv.Program(t, cqlnode.Script(root), "the script that runs Cassandra nodes for tests")
	seed := uint64(nemesisSeed)
	if v := os.Getenv("LISTGATE_NEMESIS_SEED"); v != "" {
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("LISTGATE_NEMESIS_SEED: %v", err)
		}
	}
	dir := os.Getenv("LISTGATE_NEMESIS_DIR") // where to keep the run's files; by default a temporary folder
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := nemesis.DefaultConfig(seed, 100*time.Second, root, dir)
	cfg.Profile = nemesis.ShortProfile
	cfg.Adders, cfg.Pace = 3, 25*time.Millisecond // lighter: the rest of make test may run beside it
	cfg.Bin = builtBinary(t)
	cfg.Out = gatewaytest.Log{T: t}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := nemesis.Run(ctx, cfg)
	if err != nil || !res.OK() {
		logTails(t, dir) // the run's folder goes with the test
	}
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Error(res.Line())
	}
}

// logTails shows the last lines of the run's gateway logs, and the
// warnings and errors of its nodes' logs.
func logTails(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if strings.HasSuffix(f, ".system.log") {
			lines = slices.DeleteFunc(lines, func(l string) bool { return !strings.HasPrefix(l, "WARN") && !strings.HasPrefix(l, "ERROR") })
		}
		t.Logf("the last lines of %s:\n%s", filepath.Base(f), strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}
