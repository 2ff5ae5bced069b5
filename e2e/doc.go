// Package e2e holds the process-level tests. Each runs the listgate
// command, built once per test binary with `go build` (TestVersion also
// runs `make build`), as a separate process and talks to it over HTTP;
// some also start Cassandra nodes (scripts/cassandra), Chromium, Node or
// Prometheus, and TestImage builds the container image with podman. A part from outside Go is
// required under `make test` and CI, and its tests are skipped elsewhere
// (internal/testenv). Tests that need the gateway in their own process (a
// span recorder, say) stay in package main: nothing here may call run, or
// serve requests in-process; the one direct use of a store is to seed an
// embedded store before a gateway opens it.
package e2e
