// Package nemesis runs listgate against a real three-node Cassandra
// cluster while it injects faults, then checks what the gateways promised
// (docs/reliability.md): the cluster behind proxies of the run's own
// (cluster.go, network.go, owner.go), the gateways (gatewaytest's process),
// a seeded schedule of faults (schedule.go, faults.go), a workload of adds,
// reads, counts and resuming subscriptions (workload.go, subscriber.go,
// readiness.go), and the checker of its history (checker.go). Run drives a
// run; `make nemesis` and e2e's TestClusterNemesis call it.
//
// It only ever stops, signals or resets the nodes and gateways it started
// itself, on its own addresses and ports, and touches no traffic but its
// proxies': it runs beside other tests' nodes on a shared machine.
package nemesis
