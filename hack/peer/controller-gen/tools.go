//go:build tools

// Package tools records the command this module exists to build, so that
// `go mod tidy` keeps sigs.k8s.io/controller-tools/cmd/controller-gen and its imports in
// go.mod and go.sum.
package tools

import (
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
