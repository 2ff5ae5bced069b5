.PHONY: build test bench cassandra-start cassandra-stop

# Everything CI runs: a real Cassandra, go vet, and all tests with -race.
test:
	scripts/test

# The gateway against a hand-written REST service, stock gqlgen, raw gocql
# and the embedded store; writes BENCHMARKS.md (about 9 minutes).
bench:
	scripts/bench

cassandra-start:
	scripts/cassandra start

cassandra-stop:
	scripts/cassandra stop

# The listgate command, stamped with its version (git describe) and commit:
# `listgate --version` prints them. Without Git both stay unstamped.
VERSION = $(shell git describe --tags --always --dirty 2>/dev/null)
REVISION = $(shell git rev-parse HEAD 2>/dev/null)
BIN = bin/listgate

build:
	go build -ldflags "-X main.version=$(VERSION) -X main.revision=$(REVISION)" -o $(BIN) .
