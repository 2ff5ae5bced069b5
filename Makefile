.PHONY: build image test bench nemesis cassandra-start cassandra-stop

# Everything CI runs: a real Cassandra, go vet, and all tests with -race.
test:
	scripts/test

# The gateway against a hand-written REST service, stock gqlgen, raw gocql
# and the embedded store; writes BENCHMARKS.md (about 9 minutes).
bench:
	scripts/bench

# Faults against a real three-node cluster and three gateways, then the
# checks of docs/reliability.md (NEMESIS_DURATION of faults, and a few
# minutes more to start and check); the same seed draws the same schedule.
NEMESIS_SEED ?= 1
NEMESIS_DURATION ?= 10m

nemesis:
	go run ./internal/nemesis/cmd/nemesis --seed $(NEMESIS_SEED) --duration $(NEMESIS_DURATION)

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

# The container image (Containerfile): a static binary on an empty base, so
# no registry is needed. The binary and the rest of the build context are
# made here, in IMAGE_CONTEXT; podman builds it, or docker without podman.
IMAGE ?= listgate:$(or $(VERSION),dev)
IMAGE_CONTEXT ?= bin/image
CONTAINER_TOOL ?= $(shell command -v podman 2>/dev/null || command -v docker 2>/dev/null)
CA_CERTIFICATES ?= /etc/ssl/certs/ca-certificates.crt

image:
	@test -n "$(CONTAINER_TOOL)" || { echo "make image needs podman or docker" >&2; exit 1; }
	rm -rf $(IMAGE_CONTEXT)
	mkdir -p $(IMAGE_CONTEXT)/data
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(VERSION) -X main.revision=$(REVISION)" -o $(IMAGE_CONTEXT)/listgate .
	cp $(CA_CERTIFICATES) $(IMAGE_CONTEXT)/ca-certificates.crt
	echo 'listgate:x:65532:65532:listgate:/data:/sbin/nologin' > $(IMAGE_CONTEXT)/passwd
	echo 'listgate:x:65532:' > $(IMAGE_CONTEXT)/group
	$(CONTAINER_TOOL) build -f Containerfile -t $(IMAGE) \
		--build-arg VERSION=$(or $(VERSION),dev) --build-arg REVISION=$(or $(REVISION),unknown) $(IMAGE_CONTEXT)
