package nemesis

import (
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"
)

// Kind is a kind of fault.
type Kind string

const (
	KillNode       Kind = "node killed"          // SIGKILL, then started again
	FreezeNode     Kind = "node frozen"          // SIGSTOP, then SIGCONT
	PartitionNode  Kind = "node partitioned"     // cut from the other nodes and from some gateways
	SlowNode       Kind = "node's links slow"    // latency, jitter and loss on every link of one node
	SkewClock      Kind = "node's clock stepped" // stepped, then skewed back to the machine's
	KillGateway    Kind = "gateway killed mid-add"
	IsolateGateway Kind = "gateway cut from the cluster" // from every node: it cannot serve
)

// Kinds are every kind of fault, in the order tables list them.
var Kinds = []Kind{KillNode, FreezeNode, PartitionNode, SlowNode, SkewClock, KillGateway, IsolateGateway}

// Fault is one fault of the schedule.
type Fault struct {
	N        int           // its number, from 1
	At       time.Duration // when it is due, from the start of the faults
	Gap      time.Duration // the quiet time it waits for after the fault before it heals, whatever At says
	Kind     Kind
	Node     int           // the node it strikes (0-2), for the kinds of a node
	Gateway  int           // the gateway it strikes, for the kinds of a gateway
	Gateways []int         // PartitionNode: the gateways cut from the node too
	For      time.Duration // how long it lasts before it heals
	Slow     Slow          // SlowNode
	Step     time.Duration // SkewClock: the offset the clock steps to, moved back to 0 over For
}

func (f Fault) String() string {
	var what string
	switch f.Kind {
	case KillNode:
		what = fmt.Sprintf("%s killed, started again after %v", nodeName(f.Node), f.For)
	case FreezeNode:
		what = fmt.Sprintf("%s frozen for %v", nodeName(f.Node), f.For)
	case PartitionNode:
		cut := []string{"the other nodes"}
		for _, g := range f.Gateways {
			cut = append(cut, gatewayName(g))
		}
		what = fmt.Sprintf("%s cut from %s for %v", nodeName(f.Node), strings.Join(cut, ", "), f.For)
	case SlowNode:
		what = fmt.Sprintf("%s's links %v±%v slower each way, %.1f%% loss, for %v", nodeName(f.Node), f.Slow.Latency, f.Slow.Jitter, f.Slow.Loss*100, f.For)
	case SkewClock:
		what = fmt.Sprintf("%s's clock stepped to %+v, skewed back to 0 over %v", nodeName(f.Node), f.Step, f.For)
	case KillGateway:
		what = fmt.Sprintf("%s killed with an add in flight, started again after %v", gatewayName(f.Gateway), f.For)
	case IsolateGateway:
		what = fmt.Sprintf("%s cut from every node for %v", gatewayName(f.Gateway), f.For)
	}
	return fmt.Sprintf("#%d at %v: %s", f.N, f.At.Round(time.Second), what)
}

// Profile bounds the faults a schedule draws.
type Profile struct {
	Gap     [2]time.Duration // quiet time after a heal, before the next fault
	Down    [2]time.Duration // KillNode: how long the node stays down
	Frozen  [2]time.Duration
	Lasting [2]time.Duration // PartitionNode, SlowNode, SkewClock, IsolateGateway
	Restart [2]time.Duration // KillGateway: how long the gateway stays down
	// Kinds are the kinds drawn; none: every kind.
	Kinds []Kind
	// Costs are the time each kind is expected to take beyond For (a
	// killed node's start), so that the schedule fits its duration.
	Costs map[Kind]time.Duration
}

// FullProfile is the profile of a run of many minutes.
var FullProfile = Profile{
	Gap:     [2]time.Duration{6 * time.Second, 12 * time.Second},
	Down:    [2]time.Duration{5 * time.Second, 20 * time.Second},
	Frozen:  [2]time.Duration{time.Second, 10 * time.Second},
	Lasting: [2]time.Duration{5 * time.Second, 20 * time.Second},
	Restart: [2]time.Duration{time.Second, 5 * time.Second},
	Costs:   map[Kind]time.Duration{KillNode: 30 * time.Second},
}

// ShortProfile is the profile of a bounded run of a couple of minutes:
// every kind but a node killed, whose start again takes 15 s to a minute
// on a loaded 2-core machine.
var ShortProfile = Profile{
	Kinds:   []Kind{FreezeNode, PartitionNode, SlowNode, SkewClock, KillGateway, IsolateGateway},
	Gap:     [2]time.Duration{6 * time.Second, 7 * time.Second},
	Down:    [2]time.Duration{3 * time.Second, 5 * time.Second},
	Frozen:  [2]time.Duration{time.Second, 4 * time.Second},
	Lasting: [2]time.Duration{3 * time.Second, 6 * time.Second},
	Restart: [2]time.Duration{time.Second, 2 * time.Second},
	Costs:   map[Kind]time.Duration{KillNode: 30 * time.Second},
}

// Schedule draws the faults of a run from seed: kinds in rounds, each
// round every kind once in a random order, until duration is used up
// (each fault followed by its gap). The same seed, duration, profile and
// gateway count give the same schedule.
func Schedule(seed uint64, duration time.Duration, p Profile, gateways int) []Fault {
	rng := rand.New(rand.NewPCG(seed, 0x6e656d65736973))
	within := func(r [2]time.Duration, unit time.Duration) time.Duration {
		if r[1] <= r[0] {
			return r[0]
		}
		return (r[0] + time.Duration(rng.Int64N(int64(r[1]-r[0])))).Round(unit)
	}
	between := func(r [2]time.Duration) time.Duration { return within(r, 100*time.Millisecond) }
	var faults []Fault
	at, gap := 5*time.Second, 5*time.Second // the workload runs healthy first
	kinds := p.Kinds
	if len(kinds) == 0 {
		kinds = Kinds
	}
	for {
		fitted := false
		round := append([]Kind(nil), kinds...)
		rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		for _, k := range round {
			f := Fault{N: len(faults) + 1, At: at, Gap: gap, Kind: k, Node: rng.IntN(3), Gateway: rng.IntN(gateways)}
			switch k {
			case KillNode:
				f.For = between(p.Down)
			case FreezeNode:
				f.For = between(p.Frozen)
			case PartitionNode:
				f.For = between(p.Lasting)
				for g := range gateways {
					if rng.IntN(2) == 0 {
						f.Gateways = append(f.Gateways, g)
					}
				}
			case SlowNode:
				f.For = between(p.Lasting)
				f.Slow = Slow{
					Latency: within([2]time.Duration{20 * time.Millisecond, 200 * time.Millisecond}, 10*time.Millisecond),
					Jitter:  within([2]time.Duration{0, 50 * time.Millisecond}, 10*time.Millisecond),
					Loss:    float64(rng.IntN(6)) / 100,
				}
			case SkewClock:
				f.For = between(p.Lasting)
				f.Step = within([2]time.Duration{100 * time.Millisecond, 500 * time.Millisecond}, 10*time.Millisecond)
				if rng.IntN(2) == 0 {
					f.Step = -f.Step
				}
			case KillGateway:
				f.For = between(p.Restart)
			case IsolateGateway:
				f.For = between(p.Lasting) + unreadyWithin // long enough to see it unready
			}
			end := at + f.For + p.Costs[k]
			if end > duration {
				continue // a shorter kind may still fit
			}
			fitted = true
			faults = append(faults, f)
			gap = between(p.Gap)
			at = end + gap
		}
		if !fitted {
			return faults
		}
	}
}

// printSchedule writes the schedule, one fault a line.
func printSchedule(w io.Writer, faults []Fault) {
	for _, f := range faults {
		fmt.Fprintf(w, "  %s\n", f)
	}
}
