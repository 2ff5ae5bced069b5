//go:build !stockgqlgen

package model

// stockGQLGen: the fast path serves the objects it may.
const stockGQLGen = false
