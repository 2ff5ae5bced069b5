// Command bench measures the gateway against the database it fronts and
// against its peers, in one run on one machine: pages of lists read with
// raw gocql, from a hand-written REST service (bench/restpeer), through
// the gateway and through the gateway built with gqlgen's own marshalers;
// list adds, counts and searches for values through the GraphQL endpoint
// against the same statements issued directly with gocql (reads and adds
// against the embedded store's own calls too); distinct against plain
// pages, capped against uncapped adds and one batch add against many
// adds, through the gateway; one request for many entities' lists against
// many requests; remove-by-value; and two callers on one gateway with its
// default limits, one running the heaviest operation its budget allows
// back to back beside the other's small reads. It prints a table, and
// writes it with the machine and the parameters to BENCHMARKS.md and
// bench/results.json.
//
//	go run ./bench --cql-hosts 127.0.0.1:9042     (make bench starts Cassandra first)
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

type config struct {
	cqlHosts string
	duration time.Duration
	// peerDuration is the length of each run of the peer table, shorter
	// than duration so that its 16 cells fit in the full run.
	peerDuration time.Duration
	concurrency  int
	runs         int
	out, json    string
	quick        bool
	only         string
	gatewayBin   string
	render       bool
	// The two-caller scenario: its stores, and A's list on each.
	tenantStores     string
	tenantItems      int
	tenantValueBytes int
	// On CQL.
	tenantCQLItems, tenantCQLValueBytes int
}

// does reports whether the run includes a group of scenarios.
func (c config) does(group string) bool {
	if c.only == "" {
		return true
	}
	for _, g := range strings.Split(c.only, ",") {
		if g == group {
			return true
		}
	}
	return false
}

func main() {
	var c config
	flag.StringVar(&c.cqlHosts, "cql-hosts", "", "CQL contact points of the database to measure against (required)")
	flag.DurationVar(&c.duration, "duration", 3*time.Second, "length of each measured run")
	flag.DurationVar(&c.peerDuration, "peer-duration", 2*time.Second, "length of each measured run of the peer table (gocql, REST, gateway, stock gqlgen)")
	flag.IntVar(&c.concurrency, "concurrency", 32, "requests in flight during throughput runs")
	flag.IntVar(&c.runs, "runs", 3, "runs of each measurement; medians are reported")
	flag.StringVar(&c.out, "out", "BENCHMARKS.md", "Markdown report")
	flag.StringVar(&c.json, "json", "bench/results.json", "JSON report")
	flag.StringVar(&c.only, "only", "", "run only these groups, comma separated: peers, peeradds (the adds of peers alone), contains, count, adds, distinct, caps, batch, fanout, removes, live, tenants, slownode (three nodes of its own, one frozen or slow; needs no --cql-hosts alone), embedded (for tuning; reports go to .run/)")
	flag.StringVar(&c.gatewayBin, "gateway-bin", "", "measure this listgate binary instead of building the working tree (to compare commits; the peer table's REST peer and stock gqlgen build still come from the working tree; reports go to .run/)")
	flag.StringVar(&c.tenantStores, "tenant-stores", "embedded,CQL", "the stores the two-caller scenario (tenants) runs on")
	flag.IntVar(&c.tenantItems, "tenant-items", 100_000, "items of the list the heavy caller counts, on the embedded store")
	flag.IntVar(&c.tenantValueBytes, "tenant-value-bytes", 32<<10, "bytes of each value of the list the heavy caller counts, on the embedded store")
	flag.IntVar(&c.tenantCQLItems, "tenant-cql-items", 10_000, "items of the list the heavy caller counts, on CQL")
	flag.IntVar(&c.tenantCQLValueBytes, "tenant-cql-value-bytes", 4<<10, "bytes of each value of the list the heavy caller counts, on CQL (smaller: there a count reads the values, and nine at once of 20,000 of 32 KiB, with their seeding, ran a test node of 1 GiB of heap out of memory)")
	flag.BoolVar(&c.render, "render", false, "only write --out again from --json (after a change of the report's text)")
	flag.BoolVar(&c.quick, "quick", false, "a short run with small lists, to check the harness (reports go to .run/)")
	flag.Parse()
	if c.render {
		var rep report
		b, err := os.ReadFile(c.json)
		if err == nil {
			err = json.Unmarshal(b, &rep)
		}
		if err == nil {
			err = rep.write(c.out, c.json)
		}
		if err != nil {
			log.Fatal(err)
		}
		return
	}
	if c.cqlHosts == "" && c.only != "slownode" {
		log.Fatal("--cql-hosts is required (make bench starts a Cassandra node and passes it)")
	}
	if c.quick {
		c.duration, c.peerDuration, c.runs = 500*time.Millisecond, 500*time.Millisecond, 1
	}
	if c.quick || c.only != "" || c.gatewayBin != "" {
		c.out, c.json = filepath.Join(".run", "BENCHMARKS.partial.md"), filepath.Join(".run", "results.partial.json")
	}
	began := time.Now()
	rep, err := measure(context.Background(), c)
	if err != nil {
		log.Fatal(err)
	}
	rep.Took = time.Since(began).Round(time.Second).String()
	if err := rep.write(c.out, c.json); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("\nwrote %s and %s in %s\n", c.out, c.json, rep.Took)
}

// build compiles a command of this module, pkg, with more build flags
// into .run/bench/name, so that it runs as its own process.
func build(name, pkg string, flags ...string) (string, error) {
	bin, err := filepath.Abs(filepath.Join(".run", "bench", name))
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", bin, pkg)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return bin, cmd.Run()
}

func machine() string {
	host, _ := os.Hostname()
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if len(line) > 10 && line[:10] == "model name" {
				model = line[len("model name\t: "):]
				break
			}
		}
	}
	return fmt.Sprintf("%s: %d cores (%s), %s, %s/%s", host, runtime.NumCPU(), model, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
