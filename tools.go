//go:build tools

// Package tools pins the versions of the project's code generators.
package tools

import (
	_ "github.com/99designs/gqlgen"
	_ "github.com/Khan/genqlient"
)
