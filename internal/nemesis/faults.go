package nemesis

import (
	"context"
	"fmt"
	"time"
)

// event is a fault as it ran.
type event struct {
	Fault    Fault
	Began    time.Time // injected
	Healed   time.Time // removed: thawed, healed, started again
	Answered time.Time // the cluster answers again: the node struck answers CQL
	Note     string
	Err      error
}

// End is when the fault was over: healed, and the cluster answering.
func (e event) End() time.Time {
	if e.Answered.After(e.Healed) {
		return e.Answered
	}
	return e.Healed
}

// nemesis injects the schedule's faults into the run.
type nemesis struct {
	cluster  *Cluster
	gateways []*Gateway
	work     *Workload
}

// inject runs one fault to its heal.
func (m *nemesis) inject(ctx context.Context, f Fault) event {
	e := event{Fault: f, Began: time.Now()}
	node := m.cluster.Nodes[f.Node]
	g := m.gateways[f.Gateway]
	switch f.Kind {
	case KillNode:
		if e.Err = node.Kill(); e.Err != nil {
			break
		}
		sleep(ctx, f.For)
		e.Err = node.Start()
		e.Healed = time.Now()
		e.Answered = e.Healed
		e.Note = fmt.Sprintf("down %v, started in %v", f.For, e.Healed.Sub(e.Began.Add(f.For)).Round(100*time.Millisecond))
	case FreezeNode:
		if e.Err = node.Freeze(); e.Err != nil {
			break
		}
		sleep(ctx, f.For)
		e.Err = node.Thaw()
		e.Healed = time.Now()
		e.Answered = m.answers(ctx, node)
	case PartitionNode:
		var others []string
		for i := range m.cluster.Nodes {
			if i != f.Node {
				others = append(others, nodeName(i))
			}
		}
		for _, gi := range f.Gateways {
			others = append(others, gatewayName(gi))
		}
		m.cluster.Net.Cut(node.Name, others...)
		sleep(ctx, f.For)
		m.cluster.Net.Heal()
		e.Healed, e.Answered = time.Now(), time.Now()
	case SlowNode:
		m.cluster.Net.SetSlow(node.Name, f.Slow)
		sleep(ctx, f.For)
		m.cluster.Net.Heal()
		e.Healed, e.Answered = time.Now(), time.Now()
	case SkewClock:
		if e.Err = node.SetClock(f.Step); e.Err != nil {
			break
		}
		for began := time.Now(); time.Since(began) < f.For && ctx.Err() == nil; {
			sleep(ctx, 250*time.Millisecond)
			left := 1 - float64(time.Since(began))/float64(f.For)
			if e.Err = node.SetClock(time.Duration(float64(f.Step) * max(left, 0))); e.Err != nil {
				break
			}
		}
		if err := node.SetClock(0); e.Err == nil {
			e.Err = err
		}
		e.Healed, e.Answered = time.Now(), time.Now()
	case KillGateway:
		// Mid-add: the kill waits (up to 10 s) for an add in flight.
		for deadline := time.Now().Add(10 * time.Second); m.work.addsInFlight(g) == 0 && time.Now().Before(deadline); {
			time.Sleep(2 * time.Millisecond)
		}
		inFlight := m.work.addsInFlight(g)
		e.Began = time.Now()
		g.Kill()
		e.Note = fmt.Sprintf("%d adds in flight", inFlight)
		sleep(ctx, f.For)
		e.Err = g.Start()
		e.Healed, e.Answered = time.Now(), time.Now()
	case IsolateGateway:
		var nodes []string
		for _, n := range m.cluster.Nodes {
			nodes = append(nodes, n.Name)
		}
		m.cluster.Net.Cut(g.Name, nodes...)
		sleep(ctx, f.For)
		m.cluster.Net.Heal()
		e.Healed, e.Answered = time.Now(), time.Now()
	}
	if e.Healed.IsZero() {
		e.Healed, e.Answered = time.Now(), time.Now()
	}
	return e
}

// answers waits, up to a minute, until the node answers CQL, and says when.
func (m *nemesis) answers(ctx context.Context, n *Node) time.Time {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
		if n.Answers() {
			break
		}
		sleep(ctx, 100*time.Millisecond)
	}
	return time.Now()
}

// healAll undoes whatever a fault cut short may have left: every link
// healed, every node thawed, running and on the machine's clock, every
// gateway running.
func (m *nemesis) healAll() error {
	m.cluster.Net.Heal()
	for _, n := range m.cluster.Nodes {
		n.mu.Lock()
		pid, frozen := n.pid, n.frozen
		n.mu.Unlock()
		if frozen {
			if err := n.Thaw(); err != nil {
				return err
			}
		}
		if err := n.SetClock(0); err != nil {
			return err
		}
		if pid == 0 {
			if err := n.Start(); err != nil {
				return err
			}
		}
	}
	for _, g := range m.gateways {
		if g.Base() == "" {
			if err := g.Start(); err != nil {
				return err
			}
		}
	}
	return nil
}
