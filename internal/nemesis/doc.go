// Package nemesis runs listgate against a real three-node Cassandra
// cluster while it injects faults, then checks what the gateways promised.
package nemesis
