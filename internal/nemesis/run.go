package nemesis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/listgate/listgate/internal/gatewaytest"
)

// Config is one run.
type Config struct {
	Seed     uint64
	Duration time.Duration // of the faults; setup and checks come on top
	Profile  Profile
	Gateways int // 2 or 3

	RequestTimeout  time.Duration // the gateways' --request-timeout
	Margin          time.Duration // how far past it a request may answer
	ShutdownTimeout time.Duration // the gateways' --shutdown-timeout (their default)

	Root string // the repository: scripts/cassandra, and the gateway built from it
	Dir  string // the run's files: nodes' data and logs, gateways' logs
	Bin  string // a listgate binary; "": built from Root
	Heap string // each node's heap
	Keep bool   // keep the nodes' data when the run ends

	Adders, Readers int           // workload goroutines
	Pace            time.Duration // each one's pause between requests

	Out io.Writer // the schedule, progress and the report
}

// DefaultConfig is a run of duration from seed, in the repository at root.
func DefaultConfig(seed uint64, duration time.Duration, root, dir string) Config {
	return Config{Seed: seed, Duration: duration, Profile: FullProfile, Gateways: 3,
		RequestTimeout: 3 * time.Second, Margin: time.Second, ShutdownTimeout: 15 * time.Second,
		Root: root, Dir: dir, Heap: "1g", Adders: 4, Readers: 2, Pace: 20 * time.Millisecond, Out: os.Stdout}
}

// Run runs the nemesis: the cluster, the gateways, the workload and the
// schedule's faults, then the checks. Its error says the run itself could
// not be made (a node that would not start); what the checks found is in
// the Result.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	out := cfg.Out
	began := time.Now()
	faults := Schedule(cfg.Seed, cfg.Duration, cfg.Profile, cfg.Gateways)
	fmt.Fprintf(out, "nemesis seed %d: %v of faults, %d gateways (--request-timeout %v), files in %s\nschedule (%d faults):\n",
		cfg.Seed, cfg.Duration, cfg.Gateways, cfg.RequestTimeout, cfg.Dir, len(faults))
	printSchedule(out, faults)
	since := func() string { return fmt.Sprintf("+%5.1fs", time.Since(began).Seconds()) }

	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	if cfg.Bin == "" {
		cfg.Bin = filepath.Join(cfg.Dir, "listgate")
		if err := gatewaytest.Build(cfg.Root, cfg.Bin); err != nil {
			return nil, err
		}
	}
	setupLog, err := os.Create(filepath.Join(cfg.Dir, "setup.log"))
	if err != nil {
		return nil, err
	}
	defer setupLog.Close()
	cluster, err := startCluster(cfg.Root, cfg.Dir, cfg.Heap, io.MultiWriter(out, setupLog))
	if cluster != nil {
		defer func() {
			if err := cluster.Close(cfg.Keep); err != nil {
				fmt.Fprintf(out, "stopping the cluster: %v\n", err)
			}
		}()
	}
	if err != nil {
		return nil, fmt.Errorf("starting the cluster: %w", err)
	}
	fmt.Fprintf(out, "%s cluster up\n", since())
	if err := migrate(cfg.Bin, cluster.Hosts(), setupLog); err != nil {
		return nil, err
	}
	var gateways []*Gateway
	for i := range cfg.Gateways {
		gateways = append(gateways, newGateway(i, cfg.Bin, cfg.Dir, cluster.Hosts(), cfg.RequestTimeout, cluster.Net))
	}
	defer func() {
		for _, g := range gateways {
			g.Close()
		}
	}()
	errs := make([]error, len(gateways))
	var wg sync.WaitGroup
	for i, g := range gateways {
		wg.Go(func() { errs[i] = g.Start() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	work := newWorkload(gateways, cfg.RequestTimeout)
	if err := work.createFeatures(gateways[0]); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "%s %d gateways serving\n", since(), len(gateways))

	bg, stopBackground := context.WithCancel(context.Background())
	defer stopBackground()
	var background sync.WaitGroup
	ready := &readiness{}
	for _, g := range gateways {
		background.Go(func() { ready.poll(bg, g) })
	}
	var subs []*Subscriber
	for i, l := range work.watched {
		for j := range 2 {
			s := newSubscriber(fmt.Sprintf("s%d", 2*i+j+1), l, gateways, cfg.Seed, 2*i+j)
			subs = append(subs, s)
			background.Go(func() { s.run(bg) })
		}
	}
	if err := arm(ctx, work, subs); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "%s %d subscriptions started; the workload and the faults begin\n", since(), len(subs))

	load, stopLoad := context.WithCancel(ctx)
	var workers sync.WaitGroup
	for i := range cfg.Adders {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)))
		workers.Go(func() { work.adder(load, rng, cfg.Pace) })
	}
	for i := range cfg.Readers {
		rng := rand.New(rand.NewPCG(cfg.Seed, uint64(100+i)))
		workers.Go(func() { work.reader(load, rng, cfg.Pace) })
	}

	m := &nemesis{cluster: cluster, gateways: gateways, work: work}
	start := time.Now()
	var events []event
	quiet := start
	for _, f := range faults {
		due := start.Add(f.At)
		if q := quiet.Add(f.Gap); q.After(due) {
			due = q // the fault before ran late: the quiet time still comes first
		}
		if due.After(start.Add(cfg.Duration)) || !sleep(ctx, time.Until(due)) {
			break
		}
		e := m.inject(ctx, f)
		events = append(events, e)
		quiet = e.End()
		note := ""
		if e.Note != "" {
			note = " (" + e.Note + ")"
		}
		if e.Err != nil {
			note += fmt.Sprintf(" ERROR %v", e.Err)
		}
		fmt.Fprintf(out, "%s %s: healed after %v, answering after %v%s\n", since(), f, e.Healed.Sub(e.Began).Round(100*time.Millisecond), e.End().Sub(e.Began).Round(100*time.Millisecond), note)
	}
	sleep(ctx, time.Until(start.Add(cfg.Duration)))
	if err := m.healAll(); err != nil {
		stopLoad()
		return nil, fmt.Errorf("healing after the faults: %w", err)
	}
	stopLoad()
	workers.Wait()
	fmt.Fprintf(out, "%s faults over, workload stopped: %d requests\n", since(), work.requests.Load())

	// Every gateway ready, then every subscription caught up (or a minute).
	for _, g := range gateways {
		waitReady(ctx, g, time.Minute)
	}
	wanted := func() int {
		c := checker{cfg: cfg, adds: work.hist.snapshotAdds(), subs: subs, res: &Result{}}
		c.index()
		c.checkSubscriptions()
		return c.res.Missed
	}
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && wanted() > 0; {
		sleep(ctx, 500*time.Millisecond)
	}
	fmt.Fprintf(out, "%s subscriptions caught up (or a minute passed)\n", since())

	c := &checker{cfg: cfg, subs: subs, events: events, contents: map[listRef][]item{}}
	for _, l := range work.lists {
		var err error
		for try := range 5 {
			var items []item
			if items, err = listContents(work, gateways[try%len(gateways)], l); err == nil {
				c.contents[l] = items
				break
			}
			sleep(ctx, time.Second)
		}
		if err != nil {
			return nil, err
		}
	}
	// SIGTERM with the subscriptions open: each must complete, and each
	// gateway exit 0 within --shutdown-timeout.
	for _, s := range subs {
		s.stop()
	}
	for _, g := range gateways {
		took, err := g.Terminate(cfg.ShutdownTimeout + 10*time.Second)
		c.shutdowns = append(c.shutdowns, shutdown{g.Name, took, err})
	}
	stopBackground()
	background.Wait()
	c.adds, c.requests, c.reads = work.hist.snapshot()
	c.samples = ready.snapshot()
	res := c.check()
	if err := writeHistory(filepath.Join(cfg.Dir, "history.jsonl"), c, subs); err != nil {
		fmt.Fprintf(out, "writing the history: %v\n", err)
	}
	c.report(out)
	accepted, strangers := cluster.Net.Counts()
	fmt.Fprintf(out, "the proxies took %d connections; of those that ended, %d were of no process of the run's\n", accepted, strangers)
	fmt.Fprintf(out, "%s the run took %v\n", since(), time.Since(began).Round(time.Second))
	fmt.Fprintln(out, res.Line())
	return res, nil
}

// arm starts the subscriptions: a marker added to each watched list
// every second, until each of its subscriptions has received one.
func arm(ctx context.Context, w *Workload, subs []*Subscriber) error {
	rng := rand.New(rand.NewPCG(0, 0))
	outcomes := map[string]int{} // of the markers' adds, by code ("" acknowledged)
	for deadline := time.Now().Add(90 * time.Second); ; {
		pending := map[listRef]bool{}
		for _, s := range subs {
			if !s.Started() {
				pending[s.List] = true
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("subscriptions to %v received no item in 90 s; the markers' adds: %v (by code, \"\" acknowledged)", pending, outcomes)
		}
		for l := range pending {
			a := w.newAdd(rng, l, 1)
			a.Marker = true
			if g := w.pick(rng); g != nil {
				w.addOne(g, a)
				outcomes[a.Code]++
			}
		}
		if !sleep(ctx, time.Second) {
			return ctx.Err()
		}
	}
}

// waitReady waits, up to within, until g's /readyz answers 200.
func waitReady(ctx context.Context, g *Gateway, within time.Duration) bool {
	client := &http.Client{Timeout: 3 * time.Second}
	for deadline := time.Now().Add(within); time.Now().Before(deadline); {
		if base := g.Base(); base != "" {
			if resp, err := client.Get(base + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return true
				}
			}
		}
		if !sleep(ctx, readyEvery) {
			return false
		}
	}
	return false
}

func (h *History) snapshot() ([]*add, []request, []read) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*add(nil), h.adds...), append([]request(nil), h.requests...), append([]read(nil), h.reads...)
}

func (h *History) snapshotAdds() []*add {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*add(nil), h.adds...)
}

// writeHistory writes every fault as it ran, every add, every /readyz
// answer, and every subscription with what it received, one JSON object
// a line, to Dir/history.jsonl: what a failure is read back from.
func writeHistory(path string, c *checker, subs []*Subscriber) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, e := range c.events {
		enc.Encode(map[string]any{"fault": e.Fault.String(), "began": e.Began, "healed": e.Healed, "answered": e.Answered, "note": e.Note})
	}
	for _, a := range c.adds {
		enc.Encode(map[string]any{"add": a})
	}
	for _, s := range c.samples {
		enc.Encode(map[string]any{"readyz": s})
	}
	for _, s := range subs {
		started, deliveries, sessions, gaps := s.snapshot()
		enc.Encode(map[string]any{"subscriber": s.ID, "list": s.List.String(), "started": started, "sessions": sessions, "gaps": gaps})
		for _, d := range deliveries {
			enc.Encode(map[string]any{"subscriber": s.ID, "delivery": d})
		}
	}
	return errors.Join(err, f.Close())
}
