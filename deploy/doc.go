// Package deploy holds no code: its tests render the Kubernetes manifests
// of deploy/kubernetes with kustomize's Go API, decode every object
// strictly into the Kubernetes and Prometheus Operator types, and check
// them against the listgate binary built from the module above. It is a
// module of its own so that the product's go.mod never carries
// Kubernetes's dependencies; it must never be imported.
package deploy
