// Command nemesis runs listgate against a real three-node Cassandra
// cluster under a seeded schedule of faults, then checks what the
// gateways promised (docs/reliability.md). Its last line sums the run up;
// it exits 1 when any check failed, 2 when the run could not be made.
//
//	go run ./internal/nemesis/cmd/nemesis --seed 1 --duration 10m
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/listgate/listgate/internal/cqlnode"
	"github.com/listgate/listgate/internal/nemesis"
)

func main() {
	os.Exit(run())
}

func run() int {
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	root, err := cqlnode.RepoRoot(wd)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	seed := flag.Uint64("seed", uint64(time.Now().UnixNano()%1000000), "the seed of the schedule and the workload (default: drawn, and printed)")
	duration := flag.Duration("duration", 10*time.Minute, "how long faults are injected; setup and checks take a few minutes more")
	short := flag.Bool("short", false, "draw short faults (a bounded run's profile) instead of the full ones")
	gateways := flag.Int("gateways", 3, "gateway processes (2 or 3)")
	dir := flag.String("dir", filepath.Join(root, ".run", "nemesis"), "where the nodes' data and logs and the gateways' logs go")
	keep := flag.Bool("keep", false, "keep the nodes' data when the run ends")
	flag.Parse()
	if *gateways < 2 || *gateways > 3 {
		fmt.Fprintln(os.Stderr, "--gateways must be 2 or 3")
		return 2
	}
	cfg := nemesis.DefaultConfig(*seed, *duration, root, *dir)
	cfg.Gateways, cfg.Keep = *gateways, *keep
	if *short {
		cfg.Profile = nemesis.ShortProfile
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := nemesis.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nemesis: %v\n", err)
		return 2
	}
	if !res.OK() {
		return 1
	}
	return 0
}
