.PHONY: test cassandra-start cassandra-stop

# Everything CI runs: a real Cassandra, go vet, and all tests with -race.
test:
	scripts/test

cassandra-start:
	scripts/cassandra start

cassandra-stop:
	scripts/cassandra stop
