package main

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// result is one measured run: how many operations and items it did in how
// long, and the latency of each operation.
type result struct {
	ops, items int
	errors     int
	elapsed    time.Duration
	latencies  []time.Duration
	cpu        cpuUse
}

// cpuUse is the CPU each process used during a run.
type cpuUse struct{ client, server, database time.Duration }

// perOp is the CPU of each process per operation, in microseconds.
func (r result) perOp() (client, server, database float64) {
	if r.ops == 0 {
		return 0, 0, 0
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(r.ops) }
	return us(r.cpu.client), us(r.cpu.server), us(r.cpu.database)
}

func (r result) opsPerSec() float64   { return float64(r.ops) / r.elapsed.Seconds() }
func (r result) itemsPerSec() float64 { return float64(r.items) / r.elapsed.Seconds() }

func (r result) percentile(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(r.latencies)))) - 1
	return r.latencies[max(0, min(i, len(r.latencies)-1))]
}

// op performs one operation with the worker's random source and reports
// the items it read or wrote.
type op func(ctx context.Context, rnd *rand.Rand) (items int, err error)

// meter samples the CPU of the processes a run involves.
type meter struct{ server, database int } // pids; 0 when there is none

func (m meter) sample() cpuUse {
	u := cpuUse{client: processCPU(os.Getpid())}
	if m.server != 0 {
		u.server = processCPU(m.server)
	}
	if m.database != 0 {
		u.database = processCPU(m.database)
	}
	return u
}

// run keeps concurrency workers doing op for d, bounded in time and in
// count (at most maxOps operations), and measures the CPU of m's processes.
func run(ctx context.Context, m meter, concurrency int, d time.Duration, maxOps int, f op) result {
	var (
		mu   sync.Mutex
		res  result
		wg   sync.WaitGroup
		left atomic.Int64 // operations still allowed
	)
	left.Store(int64(maxOps))
	before := m.sample()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	for w := range concurrency {
		wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), uint64(start.UnixNano())))
			var lat []time.Duration
			ops, items, errs := 0, 0, 0
			for left.Add(-1) >= 0 {
				if ctx.Err() != nil {
					break
				}
				t := time.Now()
				n, err := f(ctx, rnd)
				if ctx.Err() != nil {
					break // cut off by the deadline: not a full operation
				}
				lat = append(lat, time.Since(t))
				ops++
				if err != nil {
					errs++
					continue
				}
				items += n
			}
			mu.Lock()
			res.ops += ops
			res.items += items
			res.errors += errs
			res.latencies = append(res.latencies, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	after := m.sample()
	res.cpu = cpuUse{after.client - before.client, after.server - before.server, after.database - before.database}
	slices.Sort(res.latencies)
	return res
}

// zipf draws indexes 0..n-1, the low ones far more often (s = 1.1), like
// the entities of a real workload. The draws are made once, up front.
type zipf []int

func newZipf(n int) zipf {
	z := rand.NewZipf(rand.New(rand.NewPCG(1, 2)), 1.1, 1, uint64(n-1))
	draws := make(zipf, 1<<16)
	for i := range draws {
		draws[i] = int(z.Uint64())
	}
	return draws
}

func (z zipf) draw(rnd *rand.Rand) int { return z[rnd.IntN(len(z))] }

// sample draws n distinct indexes of 0..of-1, uniformly.
func sample(rnd *rand.Rand, n, of int) []int {
	return rnd.Perm(of)[:n]
}

// median returns the run with the median throughput.
func median(rs []result) result {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b result) int {
		switch {
		case a.opsPerSec() < b.opsPerSec():
			return -1
		case a.opsPerSec() > b.opsPerSec():
			return 1
		}
		return 0
	})
	return s[len(s)/2]
}
