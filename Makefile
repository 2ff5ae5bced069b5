.PHONY: test bench cassandra-start cassandra-stop

# Everything CI runs: a real Cassandra, go vet, and all tests with -race.
test:
	scripts/test

# Gateway against raw gocql and the embedded store; writes BENCHMARKS.md.
bench:
	scripts/bench

cassandra-start:
	scripts/cassandra start

cassandra-stop:
	scripts/cassandra stop
