//go:build tools

// Package tools records the command this module exists to build, so that
// `go mod tidy` keeps github.com/operator-framework/operator-registry and its imports in go.mod and go.sum.
package tools

import (
	_ "github.com/operator-framework/operator-registry/cmd/opm"
)
