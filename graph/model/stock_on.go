//go:build stockgqlgen

package model

// stockGQLGen: gqlgen's own marshalers serve every object
// (go build -tags stockgqlgen; bench/ compares the two).
const stockGQLGen = true
